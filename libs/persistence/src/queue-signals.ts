/**
 * What can change a waiting pull's answer (ADR 0019), raised by the database itself after the commit
 * that caused it, whichever code path or replica wrote it: a run became `queued` (trigger, cron,
 * retry, requeue, release), or a worker's session changed (status, replaced session, disabled).
 */
export type QueueSignal =
  | { readonly kind: 'run_queued' }
  | { readonly kind: 'session_changed'; readonly workerId: string }
  /** Signals may have been missed (the PostgreSQL listener reconnected): everyone should look again. */
  | { readonly kind: 'resync' };

export type QueueSignalListener = (signal: QueueSignal) => void;

export interface QueueSignals {
  /** `listener` sees every signal from now on; the returned function unsubscribes. */
  subscribe(listener: QueueSignalListener): () => void;
  /** Resolves once signals flow (PostgreSQL: `LISTEN` is in place); at once on SQLite. */
  whenListening(): Promise<void>;
  close(): Promise<void>;
}

/** The one notification channel (PostgreSQL `NOTIFY`); payloads `r:<run id>` and `w:<worker id>`. */
export const QUEUE_SIGNAL_CHANNEL = 'ql_queue';

/** A payload as the triggers write it; anything else is ignored (null). */
export function parseQueueSignal(payload: string): QueueSignal | null {
  if (payload.startsWith('r:')) return { kind: 'run_queued' };
  if (payload.startsWith('w:') && payload.length > 2) return { kind: 'session_changed', workerId: payload.slice(2) };
  return null;
}

/** Fan-out to the subscribers; a throwing listener does not stop the others. */
export class QueueSignalHub {
  private readonly listeners = new Set<QueueSignalListener>();

  subscribe(listener: QueueSignalListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(signal: QueueSignal): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(signal);
      } catch {
        // A listener's own failure is its own; the signal is a hint, never required for correctness.
      }
    }
  }

  clear(): void {
    this.listeners.clear();
  }
}
