/**
 * In-process wake-ups for log tails (ADR 0013). A writer on this process (an ingress `logs` chunk, a
 * completion, a cancel) calls `notify(runId)`; a waiting tail re-reads the store at once instead of
 * at its next poll. A write on another replica is seen by the poll only, so a tail never relies on
 * this signal for correctness. One instance per process: both listeners share it through the core.
 */
export class RunLogWaiters {
  private readonly waiting = new Map<string, Set<() => void>>();
  private closed = false;
  private tails = 0;

  /** Tails held right now, between their first empty read and their answer (a client gone is not one). */
  get size(): number {
    return this.tails;
  }

  /** Counts `tail` as held while it runs. */
  async hold<T>(tail: () => Promise<T>): Promise<T> {
    this.tails++;
    try {
      return await tail();
    } finally {
      this.tails--;
    }
  }

  notify(runId: string): void {
    for (const wake of this.waiting.get(runId) ?? []) wake();
  }

  /**
   * Resolves on a notify for `runId`, after `ms`, on `signal`'s abort or on `close()`, whichever is
   * first; `false` once closed or aborted (the tail should answer now). The timer never outlives it.
   */
  wait(runId: string, ms: number, signal: AbortSignal): Promise<boolean> {
    if (this.closed || signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const set = this.waiting.get(runId) ?? new Set<() => void>();
      this.waiting.set(runId, set);
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        set.delete(done);
        if (set.size === 0 && this.waiting.get(runId) === set) this.waiting.delete(runId);
        resolve(!this.closed && !signal.aborted);
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      set.add(done);
    });
  }

  /** Shutdown: every waiting tail answers now, and no new one waits. */
  close(): void {
    this.closed = true;
    for (const set of [...this.waiting.values()]) for (const wake of [...set]) wake();
  }
}
