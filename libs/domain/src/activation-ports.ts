import { AcknowledgementStatus, CompletionOutcome } from './activation';
import { LeaseCommand } from './run-ports';
import type { FinalLogChunk, LogStream } from './run-logs';
import { AttemptStatus, RunStatus } from './runs';

/** The session + lease fence every activation call carries (R-ACT-1); no lease term is asked for. */
export type LeaseFenceCommand = Omit<LeaseCommand, 'leaseMs'>;

export interface RunningCommand extends LeaseFenceCommand {
  readonly executorHandle: string;
}
export interface StartFailureCommand extends LeaseFenceCommand {
  readonly errorCode: string;
}
export interface CompletionCommand extends LeaseFenceCommand {
  readonly outcome: CompletionOutcome;
  readonly exitCode: number | null;
  readonly errorSummary: string | null;
  /**
   * The attempt's last output (ADR 0044): stored as `logs` chunks would be, in the completion's
   * transaction and before its state change; absent or empty: none.
   */
  readonly finalLogs?: readonly FinalLogChunk[];
}

/** What the activation answer projects (R-ACT-3); times are epoch ms, null means "not yet". */
export interface AttemptSnapshot {
  readonly runId: string;
  readonly attemptId: string;
  readonly runStatus: RunStatus;
  readonly attemptStatus: AttemptStatus;
  readonly leaseVersion: number;
  readonly leaseGeneration: number;
  /** Acknowledgements applied to the attempt so far (starting 1, running 2, final 3). */
  readonly callbackSequence: number;
  readonly deadlineAt: number | null;
  readonly startedAt: number | null;
  readonly finishedAt: number | null;
  readonly executorHandle: string | null;
  readonly errorCode: string | null;
}

export interface ActivationResult {
  readonly status: AcknowledgementStatus;
  readonly snapshot: AttemptSnapshot;
  /** R-RUN-5: a cancel request is held; the worker should stop the attempt and report `cancelled`. */
  readonly cancelRequested: boolean;
}

export interface LogChunkCommand extends LeaseFenceCommand {
  readonly seq: number;
  /** Null: the worker did not say (one from before ADR 0032). */
  readonly stream: LogStream | null;
  /** As the task wrote it; neutralized only where it is shown (ADR 0032). */
  readonly text: string;
}

export interface LogAppendResult {
  /** `stored`, or a replay of a stored chunk; `dropped`: accepted past the run's cap, not kept. */
  readonly outcome: 'stored' | 'replayed' | 'dropped';
  /** The run's output reached its cap (the marker is stored). */
  readonly truncated: boolean;
}

/** What the store answers: the wire answer and the run it went to (never sent: it wakes tails). */
export interface StoredLogChunk extends LogAppendResult {
  readonly runId: string;
}

export interface LogEntry {
  /** Position in the run's log, 1..n across its attempts: the `after` cursor of the next page. */
  readonly position: number;
  readonly attemptId: string;
  /** The worker's chunk sequence; null for the truncation marker. */
  readonly seq: number | null;
  readonly kind: 'output' | 'truncated';
  /** Null: stored without its stream (before ADR 0032, or from a worker that did not say). */
  readonly stream: LogStream | null;
  /** The stored text, as the task wrote it: a view shows `displayLogText(raw)`, never this (ADR 0032). */
  readonly raw: string;
  readonly at: number;
}

export interface LogPage {
  readonly entries: LogEntry[];
  /** The run is terminal: once a page after the last position is empty, the tail is complete. */
  readonly runEnded: boolean;
  readonly truncated: boolean;
}

export interface DeadlineSweepResult {
  readonly timedOut: number;
  readonly retried: number;
  readonly cancelled: number;
}

/**
 * Activation, completion, logs and deadlines (R-ACT-1..2, R-CMP-1..2, R-RUN-5..6): every call is
 * fenced by the session and the run lease in one transaction with the database's clock.
 */
export interface ActivationRepository {
  /** claimed → starting; fixes the deadline from the pinned revision's timeout. */
  starting(command: LeaseFenceCommand): Promise<ActivationResult>;
  /** starting → running (attempt and run); pins the executor handle. */
  running(command: RunningCommand): Promise<ActivationResult>;
  /** Ends a starting attempt; the lease ends, the slot comes back, the run retries or finishes. */
  startFailure(command: StartFailureCommand): Promise<ActivationResult>;
  /** Ends a running attempt: lease completed, attempt, run and two events; the slot comes back. */
  complete(command: CompletionCommand): Promise<ActivationResult>;
  /** Idempotent per (attempt, seq); while the attempt is starting or running. */
  appendLog(command: LogChunkCommand): Promise<StoredLogChunk>;
  /** Admin read: entries after `after` (a position), at most `limit`; null when the run is unknown. */
  readLogs(runId: string, query: { after: number; limit: number }): Promise<LogPage | null>;
  /** Attempts held by this session's live leases whose run has a cancel request (bounded, id order). */
  cancelIntents(workerId: string, sessionId: string, limit: number): Promise<string[]>;
  /** Fixed work: at most `pageSize` attempts past deadline + grace, each in its own transaction. */
  sweepDeadlines(pageSize: number, graceMs: number): Promise<DeadlineSweepResult>;
}
export const ACTIVATION_REPOSITORY = Symbol('ActivationRepository');
