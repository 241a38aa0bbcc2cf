/**
 * The run and attempt statuses and their transition tables: pure constants with no import, so the web
 * console (apps/console, bundled for the browser) shares them with the control plane (ADR 0052).
 */
export const RUN_STATUSES = [
  'queued',
  'dispatching',
  'running',
  'retry_wait',
  'succeeded',
  'failed',
  'cancelled',
  'timed_out',
  'lost',
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export const ATTEMPT_STATUSES = [
  'claimed',
  'starting',
  'running',
  'succeeded',
  'failed',
  'cancelled',
  'timed_out',
  'lost',
] as const;
export type AttemptStatus = (typeof ATTEMPT_STATUSES)[number];

/**
 * R-RUN-2: the one transition table of runs. `dispatching → queued` is a lease that ended before its
 * attempt started (release or expiry): the same attempt is claimable again under a new lease
 * generation. A run is `lost` when its last attempt was lost and the retry policy is used up.
 */
export const RUN_TRANSITIONS: Readonly<Record<RunStatus, readonly RunStatus[]>> = {
  queued: ['dispatching', 'cancelled'],
  dispatching: ['queued', 'running', 'retry_wait', 'failed', 'cancelled', 'timed_out', 'lost'],
  running: ['succeeded', 'failed', 'cancelled', 'timed_out', 'retry_wait', 'lost'],
  retry_wait: ['queued', 'cancelled'],
  succeeded: [],
  failed: [],
  cancelled: [],
  timed_out: [],
  lost: [],
};

/** R-RUN-2: the one transition table of attempts; a claimed attempt stays claimed across lease generations. */
export const ATTEMPT_TRANSITIONS: Readonly<Record<AttemptStatus, readonly AttemptStatus[]>> = {
  claimed: ['starting', 'cancelled'],
  starting: ['running', 'failed', 'cancelled', 'timed_out', 'lost'],
  running: ['succeeded', 'failed', 'cancelled', 'timed_out', 'lost'],
  succeeded: [],
  failed: [],
  cancelled: [],
  timed_out: [],
  lost: [],
};

export function isTerminalRun(status: RunStatus): boolean {
  return RUN_TRANSITIONS[status].length === 0;
}
export function isTerminalAttempt(status: AttemptStatus): boolean {
  return ATTEMPT_TRANSITIONS[status].length === 0;
}
/** An attempt has started once the worker acknowledged `starting` (R-RUN-4). */
export function hasStarted(status: AttemptStatus): boolean {
  return status === 'starting' || status === 'running';
}
