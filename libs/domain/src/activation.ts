import { canonicalJson, sha256Hex } from './canonical-json';
import { FenceReason } from './errors';
import { AttemptStatus, RunStatus, hasStarted, isTerminalAttempt } from './run-statuses';
import type { FinalLogChunk } from './run-logs';
import { RetryPolicy, retryBackoffMs } from './tasks';

/** R-ACT-1, R-CMP-1: the acknowledgements a lease holder sends about its attempt, in this order. */
export const ACTIVATION_STEPS = ['starting', 'running', 'start_failure', 'completion'] as const;
export type ActivationStep = (typeof ACTIVATION_STEPS)[number];

export const COMPLETION_OUTCOMES = ['succeeded', 'failed', 'timed_out', 'cancelled'] as const;
export type CompletionOutcome = (typeof COMPLETION_OUTCOMES)[number];

/** The answer statuses of `qinglong/remote-run-activation@v1` (R-ACT-3). */
export type AcknowledgementStatus = 'applied' | 'already_starting' | 'already_running' | 'already_terminal';

export const ACTIVATION_LIMITS = {
  executorHandle: 128,
  errorCode: 64,
  errorSummaryBytes: 1024,
  exitCodeMin: -(2 ** 31),
  exitCodeMax: 2 ** 31 - 1,
} as const;
/** The same rules the activation answer's parser applies, so a stored value always fits the wire. */
export const EXECUTOR_HANDLE_PATTERN = /^[A-Za-z0-9._:-]+$/;
export const ERROR_CODE_PATTERN = /^[a-z][a-z0-9_]*$/;

/** What each step carries besides the lease fence; the digest of it recognises an exact replay. */
export type StepPayload =
  | { readonly step: 'starting' }
  | { readonly step: 'running'; readonly executorHandle: string }
  | { readonly step: 'start_failure'; readonly errorCode: string }
  | {
      readonly step: 'completion';
      readonly outcome: CompletionOutcome;
      readonly exitCode: number | null;
      readonly errorSummary: string | null;
      /**
       * The handle `running` would have carried, when the worker sends no `running` (ADR 0047): the
       * attempt may then still be `starting`, and both steps are applied. Absent: the digest it always had.
       */
      readonly executorHandle?: string;
      /**
       * The attempt's last output (ADR 0044), stored in the completion's transaction; absent when
       * there is none, so a completion without it has the digest it always had.
       */
      readonly finalLogs?: readonly FinalLogChunk[];
    };

/** SHA-256 of the canonical payload: the same step with the same content is the same digest. */
export function stepDigest(payload: StepPayload): string {
  return sha256Hex(`ql-ack:${canonicalJson(payload)}`);
}

/**
 * ADR 0047: the digest the running slot records for a completion that carries `executorHandle` —
 * the one `running` with that handle has, so a later `running` is answered as if it had come.
 * (`ql_lease_step` computes the same on PostgreSQL: keep them in step.)
 */
export function runningDigest(executorHandle: string): string {
  return stepDigest({ step: 'running', executorHandle });
}

/** The digest slot a step records into; `start_failure` and `completion` share the one final slot. */
export type StepSlot = 'starting' | 'running' | 'final';
export function stepSlot(step: ActivationStep): StepSlot {
  return step === 'starting' || step === 'running' ? step : 'final';
}

export interface AcknowledgementState {
  readonly attemptStatus: AttemptStatus;
  /** Digests of the steps applied so far (null: not applied). */
  readonly recorded: Readonly<Record<StepSlot, string | null>>;
  /** Why the lease may not carry a new step (inactive, past its term, stale version), or null. */
  readonly leaseFault: FenceReason | null;
}

export type AcknowledgementDecision =
  /** `withRunning`: a completion that stands in for `running` too (ADR 0047); that step goes first. */
  | { readonly kind: 'apply'; readonly withRunning?: true }
  | { readonly kind: 'replay'; readonly status: Exclude<AcknowledgementStatus, 'applied'> }
  /** The control plane ended the attempt first (sweeper, deadline): one `late_callback_ignored` event. */
  | { readonly kind: 'late' }
  | { readonly kind: 'refuse'; readonly reason: FenceReason };

/** The status an answer about an attempt in `status` carries when nothing was applied. */
export function alreadyStatus(status: AttemptStatus): Exclude<AcknowledgementStatus, 'applied'> {
  if (isTerminalAttempt(status)) return 'already_terminal';
  return status === 'running' ? 'already_running' : 'already_starting';
}

const REQUIRED: Record<ActivationStep, { status: AttemptStatus; reason: FenceReason }> = {
  starting: { status: 'claimed', reason: 'attempt_started' },
  running: { status: 'starting', reason: 'attempt_not_starting' },
  start_failure: { status: 'starting', reason: 'attempt_not_starting' },
  completion: { status: 'running', reason: 'attempt_not_running' },
};

/**
 * R-ACT-1..2, R-CMP-1, R-RUN-2, for a caller whose session and lease identity (token, generation)
 * already passed: an identical step is a replay (nothing written), another payload for a recorded step
 * is refused, an attempt the control plane ended takes the step as a late callback, and otherwise the
 * step needs a live lease and the attempt in the state before it (`running` needs `starting`).
 *
 * `running` (ADR 0047): for a completion that carries `executorHandle`, `runningDigest` of it. Such
 * a completion is also the `running` step with that handle, by the same rules: on a `starting`
 * attempt both are applied, running first; once that same `running` is recorded it is a completion
 * like any other; another recorded handle is `acknowledgement_mismatch`.
 */
export function decideAcknowledgement(
  step: ActivationStep,
  digest: string,
  state: AcknowledgementState,
  running: string | null = null,
): AcknowledgementDecision {
  const recorded = state.recorded[stepSlot(step)];
  if (recorded === digest) return { kind: 'replay', status: alreadyStatus(state.attemptStatus) };
  if (recorded !== null) return { kind: 'refuse', reason: 'acknowledgement_mismatch' };
  if (isTerminalAttempt(state.attemptStatus)) {
    // The worker ended it itself: this is a step it never sent before, not a late report.
    return state.recorded.final !== null ? { kind: 'refuse', reason: 'attempt_finished' } : { kind: 'late' };
  }
  if (state.leaseFault) return { kind: 'refuse', reason: state.leaseFault };
  if (step === 'completion' && running !== null && state.recorded.running !== running) {
    if (state.recorded.running !== null) return { kind: 'refuse', reason: 'acknowledgement_mismatch' };
    if (state.attemptStatus !== REQUIRED.running.status)
      return { kind: 'refuse', reason: REQUIRED.running.reason };
    return { kind: 'apply', withRunning: true };
  }
  const required = REQUIRED[step];
  if (state.attemptStatus !== required.status) return { kind: 'refuse', reason: required.reason };
  return { kind: 'apply' };
}

/** R-ACT-1: a start failure ends the attempt `failed`, unless a cancel or the deadline came first. */
export function startFailureStatus(input: {
  readonly cancelRequested: boolean;
  readonly deadlinePassed: boolean;
}): 'failed' | 'cancelled' | 'timed_out' {
  if (input.cancelRequested) return 'cancelled';
  return input.deadlinePassed ? 'timed_out' : 'failed';
}

/** R-RUN-5: a committed cancel request wins over what the worker reports (a late success converges). */
export function completionStatus(
  outcome: CompletionOutcome,
  cancelRequested: boolean,
): Exclude<AttemptStatus, 'claimed' | 'starting' | 'running' | 'lost'> {
  return cancelRequested ? 'cancelled' : outcome;
}

/** How an attempt ended, as the run's next step sees it. */
export type AttemptEnd = 'succeeded' | 'failed' | 'cancelled' | 'timed_out' | 'lost';

/** A retry policy as a decision reads it: the attempt budget and the backoff before attempt n. */
export interface RetrySchedule {
  readonly maxAttempts: number;
  backoffMs(nextAttemptNo: number): number;
}
export function retrySchedule(policy: RetryPolicy | null): RetrySchedule | null {
  return policy ? { maxAttempts: policy.maxAttempts, backoffMs: (n) => retryBackoffMs(policy, n) } : null;
}

export type RunAfterAttempt =
  | { readonly kind: 'finish'; readonly runStatus: Extract<RunStatus, AttemptEnd> }
  | { readonly kind: 'retry'; readonly backoffMs: number };

/**
 * R-RUN-4: after an attempt ended, the run retries (failed, timed out or lost, policy not used up),
 * or finishes. Cancellation wins. A lost attempt without a policy fails the run, and with the policy
 * used up the run is lost (ADR 0005); a failed or timed-out one finishes the run with its own status.
 */
export function decideRunAfterAttempt(input: {
  readonly end: AttemptEnd;
  readonly cancelRequested: boolean;
  readonly attemptNo: number;
  readonly retry: RetrySchedule | null;
}): RunAfterAttempt {
  if (input.cancelRequested || input.end === 'cancelled') return { kind: 'finish', runStatus: 'cancelled' };
  if (input.end === 'succeeded') return { kind: 'finish', runStatus: 'succeeded' };
  if (!input.retry) return { kind: 'finish', runStatus: input.end === 'lost' ? 'failed' : input.end };
  if (input.attemptNo >= input.retry.maxAttempts) return { kind: 'finish', runStatus: input.end };
  return { kind: 'retry', backoffMs: input.retry.backoffMs(input.attemptNo + 1) };
}

/** R-RUN-6: an attempt still starting or running past its deadline plus the grace is timed out. */
export function deadlinePassed(
  attempt: { readonly status: AttemptStatus; readonly deadlineAt: number | null },
  now: number,
  graceMs: number,
): boolean {
  return hasStarted(attempt.status) && attempt.deadlineAt !== null && attempt.deadlineAt + graceMs <= now;
}
