import {
  FenceReason,
  FencedError,
  IllegalStateError,
  LeaseFenceCommand,
  LeaseRecord,
  LeaseState,
  SessionFence,
  WorkerSession,
  fenceViolation,
} from '@ql/domain';
import { RUN_COLUMNS, RunRow, toRun } from './run-sql';
import { SqlExecutor, isTrue, toInt, toMs } from './sql-executor';
import { SessionRow, toSession } from './session-sql';

/**
 * The session and lease fence shared by the lease and activation repositories (R-REG-5, R-LSE-4),
 * and their one lock order: lease row → run row → worker row (the slot), the sweeper's order too.
 */
export interface LeaseRow {
  attempt_id: string;
  lease_generation: number;
  offer_id: string;
  run_id: string;
  worker_id: string;
  session_id: string;
  session_generation: number;
  version: number | string;
  token_digest: string;
  state: LeaseState;
  expires_at: number | Date;
  claimed_at: number | Date;
}

export const LEASE_COLUMNS = `attempt_id, lease_generation, offer_id, run_id, worker_id, session_id, session_generation,
  version, token_digest, state, expires_at, claimed_at`;

export type StoredLease = LeaseRecord & { tokenDigest: string };

/** What a lease call names: the holder, its token digest, and the lease generation and version it holds. */
export type LeaseClaimant = LeaseFenceCommand;

/** R-REG-5 on a worker row read in the transaction: the live session, or a FencedError naming why not. */
export function assertSessionFence(
  worker: (SessionRow & { disabled: number | boolean }) | undefined,
  command: { sessionId: string; fence: SessionFence },
  now: number,
): WorkerSession {
  const session = worker ? toSession(worker) : null;
  const reason = fenceViolation(
    session,
    worker ? isTrue(worker.disabled) : false,
    command.sessionId,
    command.fence,
    now,
  );
  if (reason) throw new FencedError('session', reason);
  return session!;
}

type LeaseIdentity = Omit<LeaseClaimant, 'fence' | 'leaseVersion' | 'offerId'>;

/**
 * R-WRK-2 / R-RUN-7, ADR 0015: the worker's current session ending a lease of one of its earlier
 * sessions with that lease's token. Only the process that took the predecessor's journal (one owner,
 * by its lock) can know the token, and it reports only after it killed the leftover process group: the
 * old process has provably stopped. The caller's own session fence is checked as for any call.
 */
export function isSuccessorReport(lease: StoredLease, command: LeaseIdentity): boolean {
  return (
    lease.workerId === command.workerId &&
    lease.sessionId !== command.sessionId &&
    lease.tokenDigest === command.tokenDigest
  );
}

/**
 * Whose lease it is: found, same holder and token, same generation; or why not. `successor` lets the
 * worker's current session name a lease of its earlier session (`isSuccessorReport`).
 */
export function leaseIdentityViolation(
  lease: StoredLease | null,
  command: LeaseIdentity,
  successor: 'successor_allowed' | 'holder_only' = 'holder_only',
): FenceReason | null {
  if (!lease) return 'lease_not_found';
  const handedOver = successor === 'successor_allowed' && isSuccessorReport(lease, command);
  if (
    !handedOver &&
    (lease.workerId !== command.workerId ||
      lease.sessionId !== command.sessionId ||
      lease.tokenDigest !== command.tokenDigest)
  )
    return 'lease_token_mismatch';
  if (lease.leaseGeneration !== command.leaseGeneration) return 'lease_generation_mismatch';
  return null;
}

/**
 * Whether the caller's own lease may carry a new step: active, inside its term, the version it holds
 * or the one just before it. Only `renew` moves a live lease's version, and only the holder of the
 * token can renew, so a version one behind means one thing: the holder's last renewal committed and
 * its answer was lost (a replica died after the commit, ADR 0012). Refusing that would kill a healthy
 * run; two behind, or ahead, is refused.
 */
export function leaseTermViolation(
  lease: StoredLease,
  leaseVersion: number,
  now: number,
): FenceReason | null {
  if (lease.state !== 'active') return 'lease_not_active';
  if (lease.expiresAt <= now) return 'lease_expired';
  if (!isCurrentOrLastRenewal(lease, leaseVersion)) return 'lease_version_mismatch';
  return null;
}

/** The holder's version is the lease's, or one renewal behind it (that renewal's answer was lost). */
export function isCurrentOrLastRenewal(lease: StoredLease, leaseVersion: number): boolean {
  return lease.version === leaseVersion || lease.version === leaseVersion + 1;
}

/** R-LSE-4: why a lease call must be refused, or null. Keep it equal to the RENEW compare-and-set. */
export function leaseViolation(
  lease: StoredLease | null,
  command: Omit<LeaseClaimant, 'fence' | 'offerId'>,
  now: number,
  successor: 'successor_allowed' | 'holder_only' = 'holder_only',
): FenceReason | null {
  return (
    leaseIdentityViolation(lease, command, successor) ??
    leaseTermViolation(lease!, reportedVersion(lease!, command), now)
  );
}

/**
 * The lease version a call is judged by. A successor's report carries none that means anything (the
 * predecessor's renewals were not journaled), and its token already names the lease: the current one.
 */
export function reportedVersion(
  lease: StoredLease,
  command: LeaseIdentity & { leaseVersion: number },
): number {
  return isSuccessorReport(lease, command) ? lease.version : command.leaseVersion;
}

/**
 * The caller's lease (row-locked when `lock` is `{forUpdate}`) and then its worker row, read after that
 * lock so the session fence sees the latest commit; the session fence is asserted, the lease is not.
 */
export async function readFencedLease(
  tx: SqlExecutor,
  command: LeaseClaimant,
  lock: '{forUpdate}' | '',
): Promise<{ lease: StoredLease | null; session: WorkerSession; now: number }> {
  const row = await tx.one<LeaseRow & { now: number | Date }>(
    `SELECT ${LEASE_COLUMNS}, {now} AS now FROM run_leases WHERE offer_id = :offerId ${lock}`,
    { offerId: command.offerId },
  );
  const worker = await tx.one<SessionRow & { disabled: number | boolean; now: number | Date }>(
    `SELECT worker_id, session_id, generation, version, status, disabled, lease_expires_at,
       max_concurrent_runs, available_slots, registration_digest, {now} AS now FROM workers WHERE worker_id = :workerId`,
    { workerId: command.workerId },
  );
  const now = toMs(worker?.now ?? row?.now ?? Date.now());
  const session = assertSessionFence(worker, command, now);
  return { lease: row ? toLease(row) : null, session, now };
}

/** The lease's run, row-locked: its attempts change only under it. */
export async function lockRun(tx: SqlExecutor, runId: string) {
  const row = await tx.one<RunRow>(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = :id {forUpdate}`, {
    id: runId,
  });
  if (!row) throw new IllegalStateError(`run ${runId} of a lease is missing`);
  return toRun(row);
}

/**
 * Ends a live lease (terminal version bump) and gives its slot back, in the caller's transaction. The
 * slot is the holding session's: a lease of a replaced session gives nothing back (ADR 0010).
 */
export async function endLease(
  tx: SqlExecutor,
  lease: LeaseRecord,
  state: Exclude<LeaseState, 'active'>,
  knownNow?: number,
): Promise<LeaseRecord> {
  const sql = `UPDATE run_leases SET state = :state, version = version + 1, expires_at = {now}, ended_at = {now}
     WHERE offer_id = :offerId AND version = :v AND state = 'active'`;
  const params = { state, offerId: lease.offerId, v: lease.version };
  let ended: LeaseRecord | undefined;
  if (knownNow === undefined) {
    const row = await tx.one<LeaseRow>(`${sql} RETURNING ${LEASE_COLUMNS}`, params);
    ended = row && stripDigest(toLease(row));
  } else if ((await tx.run(sql, { ...params, now: knownNow })) === 1) {
    // SQLite, the lease read in this transaction (ADR 0025): what the UPDATE wrote is known.
    ended = stripDigest({ ...lease, state, version: lease.version + 1, expiresAt: knownNow });
  }
  if (!ended) throw new IllegalStateError(`lease ${lease.offerId} moved under its lock`);
  await tx.run(
    `UPDATE workers SET active_leases = active_leases - 1 WHERE worker_id = :workerId AND session_id = :sessionId`,
    { workerId: lease.workerId, sessionId: lease.sessionId },
  );
  return ended;
}

export function leaseParams(command: LeaseClaimant) {
  return {
    workerId: command.workerId,
    sessionId: command.sessionId,
    generation: command.fence.generation,
    expectedVersion: command.fence.expectedVersion,
    offerId: command.offerId,
    digest: command.tokenDigest,
    leaseGeneration: command.leaseGeneration,
    leaseVersion: command.leaseVersion,
  };
}

export function toLease(row: LeaseRow): StoredLease {
  return {
    offerId: row.offer_id,
    attemptId: row.attempt_id,
    runId: row.run_id,
    workerId: row.worker_id,
    sessionId: row.session_id,
    sessionGeneration: toInt(row.session_generation),
    leaseGeneration: toInt(row.lease_generation),
    version: toInt(row.version),
    state: row.state,
    expiresAt: toMs(row.expires_at),
    claimedAt: toMs(row.claimed_at),
    tokenDigest: row.token_digest,
  };
}

/** The digest never leaves the repository. */
export function stripDigest(lease: LeaseRecord & { tokenDigest?: string }): LeaseRecord {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { tokenDigest, ...rest } = lease;
  return rest;
}
