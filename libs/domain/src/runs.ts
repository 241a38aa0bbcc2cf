import { IllegalStateError } from './errors';
import { RetrySchedule, decideRunAfterAttempt } from './activation';
import { PlacementSpec } from './placement';
import { ATTEMPT_TRANSITIONS, AttemptStatus, RUN_TRANSITIONS, RunStatus, hasStarted } from './run-statuses';

export * from './run-statuses';

/** Throws IllegalStateError unless `from → to` is in the run table. */
export function assertRunTransition(from: RunStatus, to: RunStatus): void {
  if (!RUN_TRANSITIONS[from].includes(to)) throw new IllegalStateError(`run ${from} → ${to} is not allowed`);
}
export function assertAttemptTransition(from: AttemptStatus, to: AttemptStatus): void {
  if (!ATTEMPT_TRANSITIONS[from].includes(to)) {
    throw new IllegalStateError(`attempt ${from} → ${to} is not allowed`);
  }
}

/** Event types appended to a run's event log; low cardinality, no label values or secrets (R-PLC-3). */
export const RUN_EVENT_TYPES = [
  'run.created',
  'run.dispatching',
  'run.requeued',
  'run.running',
  'run.retry_scheduled',
  'run.cancel_requested',
  'run.finished',
  'attempt.created',
  'attempt.claimed',
  'attempt.starting',
  'attempt.running',
  'attempt.lease_released',
  'attempt.lease_expired',
  'attempt.deadline_exceeded',
  'attempt.finished',
  'attempt.late_callback_ignored',
] as const;
export type RunEventType = (typeof RUN_EVENT_TYPES)[number];

export type RunTrigger = 'manual' | 'cron';

export interface RunRecord {
  readonly id: string;
  readonly taskId: string;
  readonly revision: number;
  readonly specDigest: string;
  readonly status: RunStatus;
  readonly version: number;
  readonly priority: number;
  readonly trigger: RunTrigger;
  readonly scheduledAt: number | null;
  readonly attemptCount: number;
  readonly currentAttemptId: string | null;
  readonly cancelRequested: boolean;
  readonly availableAt: number;
  /** Normalised once, when the run was created (R-PLC-1). */
  readonly placement: PlacementSpec;
  /** Output bytes stored in `run_logs` (the truncation marker not counted) and whether the cap cut it. */
  readonly logBytes: number;
  readonly logTruncated: boolean;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly finishedAt: number | null;
}

export interface AttemptRecord {
  readonly id: string;
  readonly runId: string;
  readonly attemptNo: number;
  readonly status: AttemptStatus;
  readonly version: number;
  readonly workerId: string | null;
  /** The session whose lease last held it (null only for attempts older than the column). */
  readonly sessionId: string | null;
  readonly exitCode: number | null;
  readonly leaseGeneration: number;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly finishedAt: number | null;
}

/**
 * An attempt as the run detail shows it: how it ended, in the words its lease holder or the control
 * plane gave — a start failure's or the sweeper's code (`worker_shutdown`, `deadline_exceeded` …), a
 * completion's summary (issue 29 item 4).
 */
export interface AttemptDetail extends AttemptRecord {
  readonly errorCode: string | null;
  readonly errorSummary: string | null;
}

export interface RunEvent {
  readonly runId: string;
  readonly seq: number;
  readonly type: RunEventType;
  readonly attemptId: string | null;
  readonly at: number;
  readonly detail: Readonly<Record<string, string | number | boolean | null>> | null;
}

/** What the sweeper does with an attempt whose lease expired (R-RUN-4, R-LSE-5). */
export type ExpiryOutcome =
  | { readonly kind: 'requeue' }
  | { readonly kind: 'cancel' }
  | { readonly kind: 'retry'; readonly backoffMs: number }
  | { readonly kind: 'fail'; readonly runStatus: 'failed' | 'lost' };

/**
 * An expired lease on an unstarted attempt returns it to the queue; on a started one the attempt is
 * lost and the run retries, fails (no policy) or is lost (policy used up). Cancellation wins.
 */
export function decideExpiry(input: {
  readonly attemptStatus: AttemptStatus;
  readonly cancelRequested: boolean;
  readonly attemptNo: number;
  readonly retry: RetrySchedule | null;
}): ExpiryOutcome {
  if (input.cancelRequested) return { kind: 'cancel' };
  if (!hasStarted(input.attemptStatus)) return { kind: 'requeue' };
  const next = decideRunAfterAttempt({ ...input, end: 'lost' });
  if (next.kind === 'retry') return next;
  return { kind: 'fail', runStatus: next.runStatus === 'lost' ? 'lost' : 'failed' };
}
