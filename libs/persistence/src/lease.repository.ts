// Size: the claim, renew, release and sweep share one transaction discipline (fence, lock order, slot
// accounting, events); splitting them would spread that rule over files. Helpers live beside it
// (run-sql.ts, placement-candidates.ts, claim-preference.ts).
import {
  CANDIDATE_PAGE,
  Capabilities,
  ClaimCommand,
  ClaimResult,
  ClaimedOffer,
  FencedError,
  IdGenerator,
  IllegalStateError,
  LeaseCommand,
  LeaseRecord,
  LeaseRepository,
  OfferedAttempt,
  RunRecord,
  SweepResult,
  TaskRevisionRecord,
  UnavailableError,
  capabilityMismatch,
  decideExpiry,
  hasStarted,
  retryBackoffMs,
} from '@ql/domain';
import {
  ATTEMPT_COLUMNS,
  AttemptRow,
  EventInput,
  cachedCapabilities,
  rememberCapabilities,
  RUN_COLUMNS,
  RunRow,
  storedPlacements,
  toAttempt,
  toRun,
  moveRunQuietly,
  transitionAttempt,
  transitionRun,
} from './run-sql';
import { heldRuns } from './claim-preference';
import { ClaimBatchOptions, DEFAULT_CLAIM_BATCH } from './claim-batch';
import { OneStatementClaim, claimedLease } from './claim-in-one';
import {
  LEASE_COLUMNS,
  LeaseRow,
  StoredLease,
  assertSessionFence,
  endLease,
  leaseParams,
  leaseViolation,
  lockRun,
  readFencedLease,
  stripDigest,
  toLease,
} from './lease-fence';
import { SqlDatabase, SqlExecutor, SqlTransaction, isTrue, readNow, toInt, toMs } from './sql-executor';
import { readPinnedRevision } from './run-env-vars';
import { SESSION_FENCE_SQL, SessionRow, fenceParams } from './session-sql';

/** How many candidate pages one pull may read before it answers idle (fixed work per pull). */
export const MAX_CANDIDATE_PAGES = 4;
/**
 * The first "page" is the head of the queue alone, locked with SKIP LOCKED on PostgreSQL: with a
 * uniform queue it matches and is claimed as it is (the bare claim's own statement); it locks no row
 * it will not try to claim, so no other puller is turned away idle by rows nobody takes.
 */
export const FIRST_CANDIDATE_PAGE = 1;

/** Claims one pull makes when the row keeps moving under it without its version (see `claim`). */
const CLAIM_TRIES = 4;

/**
 * The claim's first statement: the session fence, capacity and the reservation of one slot in one
 * compare-and-set on the worker row, which stays locked for the rest of the claim. A miss writes
 * nothing, and a read afterwards names the reason (fence, replay, draining or capacity).
 */
const RESERVE_SLOT = `UPDATE workers SET active_leases = active_leases + 1
  WHERE ${SESSION_FENCE_SQL} AND status = 'online'
    AND active_leases < max_concurrent_runs AND active_leases < available_slots
  RETURNING capabilities_digest, active_leases, max_concurrent_runs, available_slots, {nowMs} AS now`;

const WORKER_STATE = `SELECT worker_id, session_id, generation, version, status, disabled, lease_expires_at,
    max_concurrent_runs, available_slots, registration_digest, active_leases, {now} AS now
  FROM workers WHERE worker_id = :workerId`;

const QUEUE_COLUMNS = `id, version, event_seq, placement_json, priority, queue_order, attempt_count,
  current_attempt_id, task_id, revision, spec_digest`;
const QUEUE_PAGE = `SELECT ${QUEUE_COLUMNS} FROM runs WHERE status = 'queued'`;
const QUEUE_KEYSET = `AND (priority < :p OR (priority = :p AND (queue_order > :q OR (queue_order = :q AND id > :id))))`;
const QUEUE_ORDER = `ORDER BY priority DESC, queue_order, id LIMIT :page`;

// The run's cancel flag rides on the answer (ADR 0017): one statement, one commit on both dialects.
const RENEW = `UPDATE run_leases SET version = version + 1, expires_at = {now + :leaseMs}
  WHERE offer_id = :offerId AND worker_id = :workerId AND session_id = :sessionId AND token_digest = :digest
    AND lease_generation = :leaseGeneration AND version = :leaseVersion AND state = 'active'
    AND expires_at > {now}
    AND EXISTS (SELECT 1 FROM workers WHERE ${SESSION_FENCE_SQL})
  RETURNING ${LEASE_COLUMNS}, (SELECT cancel_requested FROM runs WHERE id = run_leases.run_id) AS cancel_requested`;

const preferenceRun = (r: QueueRow) => ({
  id: r.id,
  spec: storedPlacements.get(r.placement_json),
  queuedAt: toInt(r.queue_order),
});

/** Thrown inside the claim transaction to roll it back and answer without it. */
class NotClaimed {
  constructor(readonly result: ClaimResult | 'explain') {}
}

interface QueueRow {
  id: string;
  version: number | string;
  event_seq: number | string;
  placement_json: string;
  priority: number;
  queue_order: number | string;
  attempt_count: number;
  current_attempt_id: string | null;
  task_id: string;
  revision: number;
  spec_digest: string;
}

/**
 * Dispatch leases on either dialect (R-LSE-1..6). A claim holds the worker's row lock for its whole
 * transaction (capacity is counted under it) and takes the run with SKIP LOCKED, so concurrent
 * pullers never wait on each other's candidates; SQLite's BEGIN IMMEDIATE serialises the same steps.
 */
export class SqlLeaseRepository implements LeaseRepository {
  private readonly oneStatement: OneStatementClaim | undefined;

  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
    /** PostgreSQL: how claims that arrive together share a statement (ADR 0027). */
    claimBatch: ClaimBatchOptions = DEFAULT_CLAIM_BATCH,
  ) {
    if (db.dialect === 'postgres') this.oneStatement = new OneStatementClaim(db, ids, claimBatch);
  }

  // PostgreSQL: one call of ql_claim in the steady state (ADR 0016). Otherwise, and when that call
  // leaves it to this path: slot reserved on the locked worker row → candidate pages → pick (SKIP
  // LOCKED) → CAS; one transaction. Anything but a committed claim rolls back, so an idle pull or a
  // replay writes nothing.
  //
  // A miss whose explanation finds the fence holding and the worker claimable again was overtaken by a
  // write that keeps the session version (an admin resume, a lease ending): the claim is made again,
  // never answered `version_mismatch` for a version that matches (that would fence a live worker).
  async claim(command: ClaimCommand): Promise<ClaimResult> {
    for (let tries = 0; tries < CLAIM_TRIES; tries++) {
      const result = await this.claimOnce(command);
      if (result !== 'again') return result;
    }
    throw new UnavailableError(
      'database_busy',
      `the worker's row changed under ${CLAIM_TRIES} claims in a row (drain and resume racing); pull again`,
    );
  }

  private async claimOnce(command: ClaimCommand): Promise<ClaimResult | 'again'> {
    const answer = this.oneStatement ? await this.oneStatement.claim(command) : 'slow';
    if (answer === 'explain') return this.explainClaim(command);
    if (answer !== 'slow') return answer;
    try {
      return await this.db.transaction((tx) => this.claimIn(tx, command));
    } catch (error) {
      if (!(error instanceof NotClaimed)) throw error;
      return error.result === 'explain' ? this.explainClaim(command) : error.result;
    }
  }

  private async claimIn(tx: SqlTransaction, command: ClaimCommand): Promise<ClaimResult> {
    const slot = await tx.one<{
      capabilities_digest: string;
      active_leases: number;
      max_concurrent_runs: number;
      available_slots: number;
      now: number | string;
    }>(RESERVE_SLOT, fenceParams(command));
    if (!slot) throw new NotClaimed('explain');
    const capabilities = await this.capabilities(tx, command.workerId, slot.capabilities_digest);
    const puller = { workerId: command.workerId, capabilities };
    let scanned = 0;
    let matchedAny = false;
    let held = 0;
    let last: QueueRow | undefined;
    for (let page = 0; page < MAX_CANDIDATE_PAGES; page++) {
      const size = last ? CANDIDATE_PAGE : FIRST_CANDIDATE_PAGE;
      // The first page is read with SKIP LOCKED (PostgreSQL): its row is ours to take as it is.
      const rows = await tx.many<QueueRow>(
        last ? `${QUEUE_PAGE} ${QUEUE_KEYSET} ${QUEUE_ORDER}` : `${QUEUE_PAGE} ${QUEUE_ORDER} {skipLocked}`,
        last
          ? { page: size, p: toInt(last.priority), q: toInt(last.queue_order), id: last.id }
          : { page: size },
      );
      scanned += rows.length;
      const matching = rows.filter(
        (r) =>
          capabilityMismatch(storedPlacements.get(r.placement_json), capabilities, command.software) === null,
      );
      if (matching.length > 0) {
        matchedAny = true;
        // Strict FIFO within a priority: a run is only passed over while it is held for a better worker.
        const holds = await heldRuns(
          tx,
          puller,
          matching.map(preferenceRun),
          toInt(slot.now),
          command.preferenceHoldMs,
        );
        const free = holds.size === 0 ? matching : matching.filter((r) => !holds.has(r.id));
        held += matching.length - free.length;
        if (free.length > 0) {
          const offer = await this.claimOne(
            tx,
            command,
            last ? await this.pick(tx, free) : free[0],
            slot.now,
          );
          if (offer) return { kind: 'offered', replayed: false, offer };
        }
      }
      if (rows.length < size) break;
      last = rows[rows.length - 1];
    }
    // Nothing to claim: this may still be a replay of an offer whose response was lost.
    const known = await tx.one<{ offer_id: string }>(
      'SELECT offer_id FROM run_leases WHERE offer_id = :offerId',
      {
        offerId: command.offerId,
      },
    );
    if (known) throw new NotClaimed('explain');
    throw new NotClaimed({
      kind: 'idle',
      reason:
        held > 0 ? 'preferred_elsewhere' : scanned === 0 || matchedAny ? 'no_queued_runs' : 'no_matching_run',
      activeLeases: toInt(slot.active_leases) - 1,
      capacity: Math.min(toInt(slot.max_concurrent_runs), toInt(slot.available_slots)),
      scanned,
    });
  }

  /**
   * The reservation missed: fenced, a replay of an offer, draining, or at capacity (read-only); or
   * `'again'` when none of these holds any more (the row moved between the miss and this read).
   */
  private async explainClaim(command: ClaimCommand): Promise<ClaimResult | 'again'> {
    return this.db.transaction(async (tx) => {
      const worker = await tx.one<
        SessionRow & { disabled: number | boolean; active_leases: number; now: number | Date }
      >(WORKER_STATE, { workerId: command.workerId });
      const now = worker ? toMs(worker.now) : await readNow(tx);
      const session = assertSessionFence(worker, command, now);
      const lease = await tx.one<LeaseRow>(
        `SELECT ${LEASE_COLUMNS} FROM run_leases WHERE offer_id = :offerId`,
        {
          offerId: command.offerId,
        },
      );
      if (lease) return this.replay(tx, toLease(lease), command, now);
      const activeLeases = toInt(worker!.active_leases);
      const capacity = Math.min(session.maxConcurrentRuns, session.availableSlots);
      const idle = (reason: 'draining' | 'no_capacity') =>
        ({ kind: 'idle', reason, activeLeases, capacity, scanned: 0 }) as const;
      if (session.status === 'draining') return idle('draining');
      if (activeLeases >= capacity) return idle('no_capacity');
      // The fence holds (version included) and a slot is free: a write that keeps the version moved
      // the row between the reservation and this read.
      return 'again';
    });
  }

  /** The document is read only when this replica has not seen its digest yet. */
  private async capabilities(tx: SqlExecutor, workerId: string, digest: string): Promise<Capabilities> {
    const cached = cachedCapabilities(digest);
    if (cached) return cached;
    const row = await tx.one<{ capabilities_json: string }>(
      'SELECT capabilities_json FROM workers WHERE worker_id = :workerId',
      { workerId },
    );
    return rememberCapabilities(digest, row!.capabilities_json);
  }

  /** Claims `picked`, a queued run this transaction holds (row lock on PostgreSQL, write lock on SQLite). */
  private async claimOne(
    tx: SqlTransaction,
    command: ClaimCommand,
    picked: QueueRow | undefined,
    now: number | string,
  ): Promise<ClaimedOffer | null> {
    if (!picked) return null;
    const run = {
      id: picked.id,
      version: toInt(picked.version),
      status: 'queued' as const,
      attemptCount: toInt(picked.attempt_count),
      currentAttemptId: picked.current_attempt_id,
    };
    // SQLite (ADR 0025): the only writer knows what it writes; every write carries the reservation's time.
    const known = this.db.dialect === 'sqlite' ? toInt(now) : undefined;
    const at: Record<string, number> = known === undefined ? {} : { now: known };
    let attempt: OfferedAttempt;
    if (run.currentAttemptId) {
      // An unstarted attempt whose last lease ended: same attempt, next lease generation (R-LSE-5).
      const row = await tx.one<{ lease_generation: number }>(
        `UPDATE attempts SET worker_id = :workerId, session_id = :sessionId,
           lease_generation = lease_generation + 1, updated_at = {now}
         WHERE id = :id AND status = 'claimed' RETURNING lease_generation`,
        { id: run.currentAttemptId, workerId: command.workerId, sessionId: command.sessionId, ...at },
      );
      if (!row) throw new IllegalStateError(`queued run ${run.id} points at a started attempt`);
      attempt = {
        id: run.currentAttemptId,
        runId: run.id,
        attemptNo: run.attemptCount,
        status: 'claimed',
        workerId: command.workerId,
        leaseGeneration: toInt(row.lease_generation),
      };
    } else {
      attempt = {
        id: this.ids.uuidV7(),
        runId: run.id,
        attemptNo: run.attemptCount + 1,
        status: 'claimed',
        workerId: command.workerId,
        leaseGeneration: 1,
      };
      await tx.run(
        `INSERT INTO attempts (id, run_id, attempt_no, status, version, worker_id, session_id, lease_generation,
           created_at, updated_at)
         VALUES (:id, :runId, :attemptNo, 'claimed', 0, :workerId, :sessionId, 1, {now}, {now})`,
        {
          id: attempt.id,
          runId: run.id,
          attemptNo: attempt.attemptNo,
          workerId: command.workerId,
          sessionId: command.sessionId,
          ...at,
        },
      );
    }
    const leaseSql = `INSERT INTO run_leases (attempt_id, lease_generation, offer_id, run_id, worker_id, session_id,
         session_generation, version, token_digest, state, expires_at, claimed_at)
       VALUES (:attemptId, :leaseGeneration, :offerId, :runId, :workerId, :sessionId, :sessionGeneration, 0,
         :digest, 'active', {now + :leaseMs}, {now})
       ON CONFLICT (offer_id) DO NOTHING`;
    const leaseParams = {
      attemptId: attempt.id,
      leaseGeneration: attempt.leaseGeneration,
      offerId: command.offerId,
      runId: run.id,
      workerId: command.workerId,
      sessionId: command.sessionId,
      sessionGeneration: command.fence.generation,
      digest: command.tokenDigest,
      leaseMs: command.leaseMs,
    };
    const leaseRow =
      known === undefined
        ? await tx.one<{ expires_at: number | Date; claimed_at: number | Date }>(
            `${leaseSql} RETURNING expires_at, claimed_at`,
            leaseParams,
          )
        : (await tx.run(leaseSql, { ...leaseParams, ...at })) === 1
          ? { expires_at: known + command.leaseMs, claimed_at: known }
          : undefined;
    // The offer id is known already: a replay (or a conflict) is answered from the durable lease.
    if (!leaseRow) throw new NotClaimed('explain');
    const moved = await moveRunQuietly(
      tx,
      run,
      'dispatching',
      [
        { type: 'run.dispatching', attemptId: attempt.id },
        {
          type: 'attempt.claimed',
          attemptId: attempt.id,
          detail: {
            attemptNo: attempt.attemptNo,
            leaseGeneration: attempt.leaseGeneration,
            workerId: command.workerId,
          },
        },
      ],
      { currentAttemptId: attempt.id, attemptCount: attempt.attemptNo },
      known === undefined ? undefined : { row: { event_seq: picked.event_seq }, now: known },
    );
    if (!moved) throw new IllegalStateError(`run ${run.id} moved under its row lock`);
    const claimed = {
      id: picked.id,
      taskId: picked.task_id,
      revision: toInt(picked.revision),
      specDigest: picked.spec_digest,
    };
    return {
      run: claimed,
      attempt,
      lease: claimedLease(command, attempt, leaseRow),
      revision: await this.revision(tx, claimed),
    };
  }

  /**
   * The first still-queued run among `matching` from an unlocked page. PostgreSQL: locked with SKIP
   * LOCKED, so concurrent pullers take different rows and never wait; its version is read under the
   * lock. SQLite: the page was read under BEGIN IMMEDIATE, the only writer, so its first row is it.
   */
  private async pick(tx: SqlTransaction, matching: readonly QueueRow[]): Promise<QueueRow | undefined> {
    if (this.db.dialect === 'sqlite') return matching[0];
    const params: Record<string, string> = {};
    const list = matching.map((r, i) => {
      params[`c${i}`] = r.id;
      return `:c${i}`;
    });
    return tx.one<QueueRow>(
      `SELECT ${QUEUE_COLUMNS} FROM runs WHERE id IN (${list.join(', ')}) AND status = 'queued'
       ORDER BY priority DESC, queue_order, id LIMIT 1 {skipLocked}`,
      params,
    );
  }

  /** R-LSE-3: the same offer id, token and session rebuild the offer from the durable lease; nothing is written. */
  private async replay(
    tx: SqlExecutor,
    lease: StoredLease,
    command: ClaimCommand,
    now: number,
  ): Promise<ClaimResult> {
    if (
      lease.tokenDigest !== command.tokenDigest ||
      lease.sessionId !== command.sessionId ||
      lease.workerId !== command.workerId
    ) {
      throw new FencedError('lease', 'offer_conflict');
    }
    if (lease.state !== 'active') throw new FencedError('lease', 'lease_not_active');
    if (lease.expiresAt <= now) throw new FencedError('lease', 'lease_expired');
    const runRow = await tx.one<RunRow>(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = :id`, {
      id: lease.runId,
    });
    const attemptRow = await tx.one<AttemptRow>(`SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE id = :id`, {
      id: lease.attemptId,
    });
    const run = {
      id: runRow!.id,
      taskId: runRow!.task_id,
      revision: toInt(runRow!.revision),
      specDigest: runRow!.spec_digest,
    };
    return {
      kind: 'offered',
      replayed: true,
      offer: {
        run,
        attempt: {
          id: attemptRow!.id,
          runId: attemptRow!.run_id,
          attemptNo: toInt(attemptRow!.attempt_no),
          status: attemptRow!.status,
          workerId: attemptRow!.worker_id,
          leaseGeneration: toInt(attemptRow!.lease_generation),
        },
        lease: stripDigest(lease),
        revision: await this.revision(tx, run),
      },
    };
  }

  // One CAS on the lease, guarded by the session fence in the same statement, answering the cancel flag.
  async renew(command: LeaseCommand): Promise<{ lease: LeaseRecord; cancelRequested: boolean }> {
    const row = await this.db.one<LeaseRow & { cancel_requested: number | boolean | null }>(RENEW, {
      ...leaseParams(command),
      leaseMs: command.leaseMs,
      no: false,
    });
    if (row) return { lease: stripDigest(toLease(row)), cancelRequested: isTrue(row.cancel_requested) };
    return this.renewAnswer(await this.renewMiss(command));
  }

  /** A renewal sent again after its answer was lost: the lease as it stands and the run's flag. */
  private async renewAnswer(lease: StoredLease): Promise<{ lease: LeaseRecord; cancelRequested: boolean }> {
    const run = await this.db.one<{ cancel_requested: number | boolean }>(
      'SELECT cancel_requested FROM runs WHERE id = :id',
      { id: lease.runId },
    );
    return { lease: stripDigest(lease), cancelRequested: isTrue(run?.cancel_requested ?? false) };
  }

  /**
   * The renew CAS missed. The same renewal sent again after its answer was lost (the lease is one
   * version ahead of it, everything else holds) gets the lease as it stands, and nothing is written;
   * anything else is refused with its reason.
   */
  private async renewMiss(command: LeaseCommand): Promise<StoredLease> {
    const { lease, now } = await readFencedLease(this.db, command, '');
    const reason = leaseViolation(lease, command, now);
    if (reason) throw new FencedError('lease', reason);
    if (lease!.version !== command.leaseVersion + 1) throw new FencedError('lease', 'lease_version_mismatch');
    return lease!;
  }

  // Lease lock → run lock → worker row (slot), the sweeper's order; before start only (R-LSE-5).
  async release(command: LeaseCommand): Promise<LeaseRecord> {
    return this.db.transaction(async (tx) => {
      const { lease, now } = await readFencedLease(tx, command, '{forUpdate}');
      // An unstarted attempt of its predecessor is given back by the successor too (ADR 0015).
      const leaseReason = leaseViolation(lease, command, now, 'successor_allowed');
      if (leaseReason || !lease) throw new FencedError('lease', leaseReason ?? 'lease_not_found');
      const { run, attempt } = await lockRunOf(tx, lease);
      if (hasStarted(attempt.status) || attempt.status !== 'claimed') {
        throw new FencedError('lease', 'attempt_started');
      }
      const ended = await endLease(tx, lease, 'released');
      const events: EventInput[] = [
        {
          type: 'attempt.lease_released',
          attemptId: attempt.id,
          detail: { leaseGeneration: lease.leaseGeneration },
        },
      ];
      if (run.cancelRequested) {
        await transitionAttempt(tx, attempt, 'cancelled');
        await this.mustMove(tx, run, 'cancelled', [
          ...events,
          { type: 'run.finished', detail: { status: 'cancelled' } },
        ]);
      } else {
        await this.mustMove(tx, run, 'queued', [...events, { type: 'run.requeued' }], { requeue: true });
      }
      return ended;
    });
  }

  // Fixed work: one page of expired leases and one page of due retries, each item in its own
  // transaction that re-checks under SKIP LOCKED, so N replicas sweeping at once never double-apply.
  async sweep(pageSize: number): Promise<SweepResult> {
    const result = { requeued: 0, lost: 0, cancelled: 0, retried: 0, failed: 0 };
    const expired = await this.db.many<{ offer_id: string }>(
      `SELECT offer_id FROM run_leases WHERE state = 'active' AND expires_at <= {now}
       ORDER BY expires_at LIMIT :page`,
      { page: pageSize },
    );
    for (const item of expired) {
      const outcome = await this.db.transaction((tx) => this.expireOne(tx, item));
      if (outcome) result[outcome]++;
    }
    const due = await this.db.many<{ id: string }>(
      `SELECT id FROM runs WHERE status = 'retry_wait' AND next_attempt_at <= {now}
       ORDER BY next_attempt_at LIMIT :page`,
      { page: pageSize },
    );
    for (const { id } of due) {
      const moved = await this.db.transaction(async (tx) => {
        const row = await tx.one<RunRow>(
          `SELECT ${RUN_COLUMNS} FROM runs WHERE id = :id AND status = 'retry_wait'
             AND next_attempt_at <= {now} {skipLocked}`,
          { id },
        );
        if (!row) return false;
        const run = toRun(row);
        await this.mustMove(
          tx,
          run,
          'queued',
          [{ type: 'run.requeued', detail: { nextAttemptNo: run.attemptCount + 1 } }],
          {
            requeue: true,
            currentAttemptId: null,
          },
        );
        return true;
      });
      if (moved) result.retried++;
    }
    return result;
  }

  private async expireOne(tx: SqlTransaction, item: { offer_id: string }): Promise<keyof SweepResult | null> {
    const leaseRow = await tx.one<LeaseRow>(
      `SELECT ${LEASE_COLUMNS} FROM run_leases WHERE offer_id = :offerId
         AND state = 'active' AND expires_at <= {now} {skipLocked}`,
      { offerId: item.offer_id },
    );
    if (!leaseRow) return null; // renewed, released, or another replica has it
    const lease = toLease(leaseRow);
    const { run, attempt } = await lockRunOf(tx, lease);
    await endLease(tx, lease, 'expired');
    const expiredEvent: EventInput = {
      type: 'attempt.lease_expired',
      attemptId: attempt.id,
      detail: { leaseGeneration: lease.leaseGeneration, started: hasStarted(attempt.status) },
    };
    const revision = await this.revision(tx, run);
    const retry = revision.spec.retry;
    const outcome = decideExpiry({
      attemptStatus: attempt.status,
      cancelRequested: run.cancelRequested,
      attemptNo: attempt.attemptNo,
      retry: retry ? { maxAttempts: retry.maxAttempts, backoffMs: (n) => retryBackoffMs(retry, n) } : null,
    });
    const finished = (status: string): EventInput => ({
      type: 'attempt.finished',
      attemptId: attempt.id,
      detail: { status },
    });
    switch (outcome.kind) {
      case 'requeue':
        await this.mustMove(tx, run, 'queued', [expiredEvent, { type: 'run.requeued' }], { requeue: true });
        return 'requeued';
      case 'cancel':
        await transitionAttempt(tx, attempt, 'cancelled');
        await this.mustMove(tx, run, 'cancelled', [
          expiredEvent,
          finished('cancelled'),
          { type: 'run.finished', detail: { status: 'cancelled' } },
        ]);
        return 'cancelled';
      case 'retry':
        await transitionAttempt(tx, attempt, 'lost');
        await this.mustMove(
          tx,
          run,
          'retry_wait',
          [
            expiredEvent,
            finished('lost'),
            {
              type: 'run.retry_scheduled',
              detail: { nextAttemptNo: attempt.attemptNo + 1, backoffMs: outcome.backoffMs },
            },
          ],
          { retryAfterMs: outcome.backoffMs },
        );
        return 'lost';
      case 'fail':
        await transitionAttempt(tx, attempt, 'lost');
        await this.mustMove(tx, run, outcome.runStatus, [
          expiredEvent,
          finished('lost'),
          { type: 'run.finished', detail: { status: outcome.runStatus } },
        ]);
        return 'failed';
    }
  }

  async findLease(offerId: string): Promise<LeaseRecord | null> {
    const row = await this.db.one<LeaseRow>(
      `SELECT ${LEASE_COLUMNS} FROM run_leases WHERE offer_id = :offerId`,
      {
        offerId,
      },
    );
    return row ? stripDigest(toLease(row)) : null;
  }

  private async mustMove(
    tx: SqlExecutor,
    run: RunRecord,
    to: Parameters<typeof transitionRun>[2],
    events: EventInput[],
    set: Parameters<typeof transitionRun>[4] = {},
  ): Promise<void> {
    const moved = await moveRunQuietly(tx, run, to, events, set);
    if (!moved) throw new IllegalStateError(`run ${run.id} moved under its row lock`);
  }

  private async revision(
    tx: SqlExecutor,
    run: {
      readonly id: string;
      readonly taskId: string;
      readonly revision: number;
      readonly specDigest: string;
    },
  ): Promise<TaskRevisionRecord> {
    // With the global env vars the run was pinned with (ADR 0061).
    const revision = await readPinnedRevision(tx, run);
    if (!revision) throw new IllegalStateError(`run ${run.id} pins a missing revision`);
    return revision;
  }
}

/** The lease's run (row-locked: attempts change only under it) and its attempt. */
async function lockRunOf(tx: SqlExecutor, lease: LeaseRecord) {
  const run = await lockRun(tx, lease.runId);
  const attemptRow = await tx.one<AttemptRow>(`SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE id = :id`, {
    id: lease.attemptId,
  });
  return { run, attempt: toAttempt(attemptRow!) };
}
