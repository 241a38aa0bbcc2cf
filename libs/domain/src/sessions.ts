import { FenceReason, FencedError } from './errors';
import { RegistrationSnapshot, SessionFence } from './registration';

export const SESSION_STATUSES = ['online', 'draining', 'offline'] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

/**
 * A worker's status as the admin views, their filter and `/metrics` show it (ADR 0035): the stored
 * session status corrected by what it implies — `disabled` when an operator disabled the worker,
 * `expired` when its session is not offline but its lease passed by the database clock. Only `online`
 * and `draining` mean a live process; the order is the console's.
 */
export const WORKER_STATUSES = ['online', 'draining', 'expired', 'offline', 'disabled'] as const;
export type WorkerStatus = (typeof WORKER_STATUSES)[number];

/** The current session of one worker as stored (R-REG-3). Times are epoch milliseconds. */
export interface WorkerSession {
  readonly workerId: string;
  readonly sessionId: string;
  readonly generation: number;
  readonly version: number;
  readonly status: SessionStatus;
  readonly leaseExpiresAt: number;
  readonly maxConcurrentRuns: number;
  readonly availableSlots: number;
  readonly registrationDigest: string;
}

/** What the registry knows about a worker when a registration arrives (read under the worker's lock). */
export interface RegistrationContext {
  readonly current: WorkerSession | null;
  readonly disabled: boolean;
  /** The requested session id was used by this worker before and is no longer current. */
  readonly sessionPreviouslyUsed: boolean;
  /**
   * The highest generation this worker id ever held (its session rows outlive a deleted worker row);
   * a new row continues after it, so `(worker, generation)` never names two sessions. 0 when none.
   */
  readonly lastGeneration?: number;
}

export type RegistrationDecision =
  | { readonly kind: 'create'; readonly generation: number; readonly version: 0 }
  | { readonly kind: 'replay' }
  | {
      readonly kind: 'replace';
      readonly generation: number;
      readonly version: number;
      readonly previous: WorkerSession;
    };

/** R-REG-4: first registration, idempotent replay, conflict, or atomic replacement. */
export function decideRegistration(
  ctx: RegistrationContext,
  sessionId: string,
  snapshot: Pick<RegistrationSnapshot, 'digest'>,
  now: number,
): RegistrationDecision {
  if (ctx.disabled) throw new FencedError('session', 'worker_disabled');
  const current = ctx.current;
  if (current && current.sessionId === sessionId) {
    if (current.status === 'offline') throw new FencedError('session', 'session_offline');
    if (current.registrationDigest !== snapshot.digest)
      throw new FencedError('session', 'session_content_mismatch');
    if (current.leaseExpiresAt <= now) throw new FencedError('session', 'session_expired');
    return { kind: 'replay' };
  }
  if (ctx.sessionPreviouslyUsed) throw new FencedError('session', 'session_fenced');
  if (!current) return { kind: 'create', generation: (ctx.lastGeneration ?? 0) + 1, version: 0 };
  return {
    kind: 'replace',
    generation: current.generation + 1,
    version: current.version + 1,
    previous: current,
  };
}

/**
 * R-REG-5: why a fenced call must be refused, or null when it may proceed. Storage adapters encode
 * the same rule in their compare-and-set; this function names the reason when the CAS misses.
 */
export function fenceViolation(
  current: WorkerSession | null,
  disabled: boolean,
  sessionId: string,
  fence: SessionFence,
  now: number,
): FenceReason | null {
  if (!current) return 'unknown_worker';
  if (disabled) return 'worker_disabled';
  if (current.sessionId !== sessionId) return 'session_replaced';
  if (current.generation !== fence.generation) return 'generation_mismatch';
  if (current.status === 'offline') return 'session_offline';
  if (current.leaseExpiresAt <= now) return 'session_expired';
  if (current.version !== fence.expectedVersion) return 'version_mismatch';
  return null;
}

export type SessionAction = 'heartbeat' | 'drain' | 'offline';

/*
 * R-REG-6 — what an accepted heartbeat, drain or offline does to the session (version + 1, slots
 * reported while online and 0 otherwise, the lease extended, or ended by offline) — is the write of the
 * same compare-and-set that checks the fence, so it lives in SQL only: `HEARTBEAT_BATCH_SQL` (the
 * batched heartbeat, which refuses slots above the maximum), `DRAIN` and `OFFLINE` in
 * libs/persistence/src/worker-session.repository.ts; test/contract/worker-session.contract.ts holds
 * it on both dialects. A domain copy computed from a row read first would cost a round trip.
 */

/**
 * What a session call asks beyond its fence — its action and body — as one comparable key, stored with
 * the session by every accepted heartbeat, drain and offline in the same write that moves its version
 * (R-WRK-7, ADR 0012).
 */
export function sessionCallKey(action: SessionAction, availableSlots = 0, recoveryRequired = 0): string {
  if (action !== 'heartbeat') return action;
  return recoveryRequired > 0
    ? `heartbeat:${availableSlots}:recovery:${recoveryRequired}`
    : `heartbeat:${availableSlots}`;
}

/**
 * R-WRK-7 / ADR 0012: a call the session applied last, sent again because its answer was lost (the
 * replica died after the commit, the worker moved to another). It is answered with the current session
 * instead of being fenced as `version_mismatch`, and applied no second time. Only for the current
 * session of an enabled worker, at its own generation, exactly one version past the call's fence (so
 * nothing wrote the version since), with the very same action and body; an offline session answers
 * only its own offline, any other needs its lease still live. A replaced, disabled, expired or
 * moved-on session is refused as before.
 */
export function isReplayOfLastCall(
  current: WorkerSession | null,
  lastCall: string | null,
  disabled: boolean,
  sessionId: string,
  callKey: string,
  fence: SessionFence,
  now: number,
): boolean {
  if (!current || disabled || lastCall !== callKey) return false;
  if (current.sessionId !== sessionId || current.generation !== fence.generation) return false;
  if (current.version !== fence.expectedVersion + 1) return false;
  // Disabling also moves the version and ends the session: an offline session replays nothing but offline.
  if (current.status === 'offline') return callKey === sessionCallKey('offline');
  return current.leaseExpiresAt > now;
}

/*
 * Who may take a run (online, enabled, lease unexpired) is `candidateRejection` in placement.ts for
 * the "why pending" view and preferred placement, and the claim's own compare-and-set in SQL (the
 * `RESERVE_SLOT` over the session fence in libs/persistence/src/lease.repository.ts, `ql_claim` on
 * PostgreSQL).
 */
