import type { QueueSignal, QueueSignals } from '@ql/persistence';

/**
 * Why a held pull woke: a run was queued (`run`), its worker's session changed (`session`), its
 * re-check timer (`recheck`), the client went away (`aborted`) or the plane is shutting down (`closed`).
 */
export type OfferWakeReason = 'run' | 'session' | 'recheck' | 'aborted' | 'closed';

/**
 * One "a run was queued" wake-up, handed from waiter to waiter: a woken pull that cannot take the run
 * (no matching capability, held for a better worker) passes it on, at most once per waiter that
 * was waiting when the run was queued, so the one run never makes more than that many claims.
 */
export interface RunWake {
  hops: number;
}

export interface OfferWake {
  readonly reason: OfferWakeReason;
  readonly run?: RunWake;
}

interface Waiter {
  readonly workerId: string;
  readonly wake: (wake: OfferWake) => void;
}

/**
 * The pulls held on this process (ADR 0019), woken by the database's queue signals: one waiter, the
 * longest waiting, per queued run (not a thundering herd of claims for one run); every waiter of a
 * worker whose session changed (drain, replacement, disable: its re-claim answers idle or fenced);
 * every waiter on `resync` and `close()`. One instance per process, through the core.
 */
export class OfferWaiters {
  /** Insertion-ordered: the head is the longest waiting. */
  private readonly waiting = new Set<Waiter>();
  private closed = false;
  private held = 0;
  private signalCount = 0;
  private readonly unsubscribe: () => void;
  private readonly watchers = new Set<{ count: number; resolve: () => void }>();

  constructor(signals?: QueueSignals) {
    this.unsubscribe = signals?.subscribe((signal) => this.onSignal(signal)) ?? (() => undefined);
  }

  /** Pulls held right now, from their first idle claim to their answer. */
  get size(): number {
    return this.held;
  }

  /** Pulls waiting for a signal right now (not those claiming again). */
  get waitingCount(): number {
    return this.waiting.size;
  }

  /**
   * Counts signals: a pull reads it before it claims, and `wait` returns at once when a signal came
   * in meanwhile (a run queued while the claim was running is not slept through).
   */
  get epoch(): number {
    return this.signalCount;
  }

  /** Resolves once at least `count` pulls wait for a signal (tests and benches await this, not a sleep). */
  whenWaiting(count: number): Promise<void> {
    if (this.waiting.size >= count) return Promise.resolve();
    return new Promise((resolve) => this.watchers.add({ count, resolve }));
  }

  async hold<T>(pull: () => Promise<T>): Promise<T> {
    this.held++;
    try {
      return await pull();
    } finally {
      this.held--;
    }
  }

  /**
   * Resolves on the first of: a wake for this pull, `ms` (`recheck`), `signal`'s abort, `close()`;
   * at once when closed, aborted, or when a signal arrived since `epoch`. The timer and the abort
   * listener never outlive it.
   */
  wait(workerId: string, ms: number, signal: AbortSignal, epoch: number): Promise<OfferWake> {
    if (this.closed) return Promise.resolve({ reason: 'closed' });
    if (signal.aborted) return Promise.resolve({ reason: 'aborted' });
    if (epoch !== this.signalCount) return Promise.resolve({ reason: 'recheck' });
    return new Promise((resolve) => {
      const done = (wake: OfferWake) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', aborted);
        this.waiting.delete(waiter);
        resolve(wake);
      };
      const waiter: Waiter = { workerId, wake: done };
      const aborted = () => done({ reason: 'aborted' });
      const timer = setTimeout(() => done({ reason: 'recheck' }), ms);
      signal.addEventListener('abort', aborted, { once: true });
      this.waiting.add(waiter);
      for (const watcher of [...this.watchers])
        if (this.waiting.size >= watcher.count) {
          this.watchers.delete(watcher);
          watcher.resolve();
        }
    });
  }

  /** A run was queued: the longest-waiting pull claims again. */
  runQueued(): void {
    this.signalCount++;
    this.wakeHead({ hops: this.waiting.size - 1 });
  }

  /** A woken pull could not take the run it was woken for: the next one in line tries. */
  passOn(run: RunWake): void {
    if (run.hops-- > 0) this.wakeHead(run);
  }

  sessionChanged(workerId: string): void {
    this.signalCount++;
    for (const waiter of [...this.waiting])
      if (waiter.workerId === workerId) waiter.wake({ reason: 'session' });
  }

  /** Every held pull claims again (notifications may have been lost). */
  resync(): void {
    this.signalCount++;
    for (const waiter of [...this.waiting]) waiter.wake({ reason: 'recheck' });
  }

  /** Shutdown: every held pull answers now, and no new one waits. */
  close(): void {
    this.closed = true;
    this.unsubscribe();
    for (const waiter of [...this.waiting]) waiter.wake({ reason: 'closed' });
  }

  private wakeHead(run: RunWake): void {
    const head = this.waiting.values().next();
    if (!head.done) head.value.wake({ reason: 'run', run });
  }

  private onSignal(signal: QueueSignal): void {
    if (signal.kind === 'run_queued') this.runQueued();
    else if (signal.kind === 'session_changed') this.sessionChanged(signal.workerId);
    else this.resync();
  }
}
