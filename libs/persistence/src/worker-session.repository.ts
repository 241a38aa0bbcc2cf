// Size: register and the fenced session calls share one compare-and-set (SESSION_FENCE_SQL) and its miss
// explanation; the admin worker views (list, detail, drain, delete) read and write the same rows.
import {
  AuditEntry,
  FencedError,
  HeartbeatAnswer,
  HeartbeatCommand,
  IdGenerator,
  NotFoundError,
  RegisterSessionCommand,
  RegistrationResult,
  SessionAction,
  SessionCommand,
  ValidationError,
  WorkerActiveRun,
  WorkerListQuery,
  WorkerRecord,
  WorkerSession,
  WorkerSessionRepository,
  WorkerStatus,
  decideRegistration,
  fenceViolation,
  isReplayOfLastCall,
  sessionCallKey,
} from '@ql/domain';
import { appendAudit } from './audit-sql';
import { revokeIssuedCertificates } from './certificate-sql';
import { cancelIntentsSql } from './run-sql';
import {
  SESSION_COLUMNS,
  SESSION_FENCE_SQL,
  SessionRow,
  WorkerRow,
  fenceParams,
  sessionFence,
  toSession,
} from './session-sql';
import { SqlDatabase, SqlTransaction, isTrue, readNow, toInt, toMs, toMsOrNull } from './sql-executor';
import {
  ACTIVE_RUNS_SQL,
  ActiveRunRow,
  adminColumns,
  listWorkersSql,
  notDeletable,
  notDrainable,
  notEnableable,
  notResumable,
  writeLabels,
} from './worker-admin-sql';

/** An admin read: the row and its effective status by the database's clock (ADR 0035). */
interface AdminWorkerRow extends WorkerRow {
  effective_status: WorkerStatus;
  certificate_issued_at: number | Date | null;
  certificate_not_after: number | Date | null;
  certificate_fingerprint: string | null;
}

const COLUMNS = `worker_id, disabled, session_id, generation, version, status, lease_expires_at,
  max_concurrent_runs, available_slots, registration_digest, capabilities_json, capabilities_digest,
  software_version, protocol_version, registered_at, last_seen_at, recovery_required`;

const ADMIN_COLUMNS = adminColumns(COLUMNS);

// Each accepted call records its own key (last_call): an exact replay after a lost answer is then
// recognised by explainMiss (R-WRK-7, ADR 0012).

/**
 * The heartbeat CAS for many calls in one statement (ADR 0018): the calls arrive as one JSON array,
 * each row is the session fence (SESSION_FENCE_SQL's shape) with slots ≤ max, and each updated row
 * carries its session's cancel intents (`cancelIntentsSql`, R-RUN-5) read in the same statement. A
 * worker may appear once. On PostgreSQL the batch's workers are also named by primary key
 * (`worker_id = ANY (ARRAY(…))`): without it the planner, which guesses 100 rows for the JSON, may
 * hash-join against every registered worker, so a heartbeat's cost would grow with the sessions (issue
 * 10 item 4; `test/contract/heartbeat-batch.contract.ts` counts the scans).
 */
const BATCH_FENCE = sessionFence({
  workerId: 'b.b_worker',
  sessionId: 'b.b_session',
  generation: 'b.b_generation',
  version: 'b.b_version',
});
const BATCH_SET = `version = version + 1, last_call = b.b_call,
    available_slots = CASE WHEN status = 'online' THEN b.b_slots ELSE 0 END, last_seen_at = {now},
    recovery_required = b.b_recovery`;
const cancelsOf = (alias: string, aggregate: string) =>
  `(SELECT ${aggregate} FROM (${cancelIntentsSql(`${alias}.worker_id`, `${alias}.session_id`)}) c)`;
export const HEARTBEAT_BATCH_SQL = {
  postgres: `WITH b AS MATERIALIZED (
    SELECT w AS b_worker, s AS b_session, g AS b_generation, v AS b_version, n AS b_slots,
        l AS b_lease, k AS b_call, r AS b_recovery
      FROM json_to_recordset(:batch::json) AS j(w text, s uuid, g int4, v int8, n int4, l int8, k text, r int4)),
  u AS (
    UPDATE workers SET ${BATCH_SET}, lease_expires_at = {now} + b.b_lease * interval '1 millisecond'
    FROM b
    WHERE ${BATCH_FENCE} AND max_concurrent_runs >= b.b_slots
      AND workers.worker_id = ANY (ARRAY(SELECT b_worker FROM b))
    RETURNING ${SESSION_COLUMNS}, last_call)
  SELECT u.*, ${cancelsOf('u', `coalesce(json_agg(c.attempt_id ORDER BY c.attempt_id), '[]'::json)`)} AS cancels
  FROM u`,
  sqlite: `UPDATE workers SET ${BATCH_SET}, lease_expires_at = {now} + b.b_lease
    FROM (SELECT value ->> 'w' AS b_worker, value ->> 's' AS b_session, value ->> 'g' AS b_generation,
        value ->> 'v' AS b_version, value ->> 'n' AS b_slots, value ->> 'l' AS b_lease, value ->> 'k' AS b_call,
        value ->> 'r' AS b_recovery
      FROM json_each(:batch)) AS b
    WHERE ${BATCH_FENCE} AND max_concurrent_runs >= b.b_slots
    RETURNING ${SESSION_COLUMNS}, last_call, ${cancelsOf('workers', 'json_group_array(c.attempt_id ORDER BY c.attempt_id)')} AS cancels`,
};

const DRAIN = `UPDATE workers SET version = version + 1, last_call = :callKey, status = 'draining', available_slots = 0,
    lease_expires_at = {now + :leaseMs}, last_seen_at = {now}
  WHERE ${SESSION_FENCE_SQL}
  RETURNING ${SESSION_COLUMNS}`;

const OFFLINE = `UPDATE workers SET version = version + 1, last_call = :callKey, status = 'offline', available_slots = 0,
    lease_expires_at = {now}, last_seen_at = {now}
  WHERE ${SESSION_FENCE_SQL}
  RETURNING ${SESSION_COLUMNS}`;

/**
 * Worker sessions on either dialect: the SQL is shared, and what differs (locks, clock, placeholders)
 * is compiled by the SqlDatabase adapter.
 */
export class SqlWorkerSessionRepository implements WorkerSessionRepository {
  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
  ) {}

  // Serialised per worker: SQLite BEGIN IMMEDIATE; PostgreSQL advisory lock on the worker id, then row lock.
  async register(command: RegisterSessionCommand): Promise<RegistrationResult> {
    const { workerId, sessionId, snapshot } = command;
    return this.db.transaction(async (tx) => {
      await tx.lock(`worker:${workerId}`);
      const row = await tx.one<WorkerRow>(
        `SELECT ${COLUMNS} FROM workers WHERE worker_id = :workerId {forUpdate}`,
        {
          workerId,
        },
      );
      const now = await readNow(tx);
      const owner = await tx.one<{ worker_id: string }>(
        'SELECT worker_id FROM worker_sessions WHERE session_id = :sessionId',
        { sessionId },
      );
      // A deleted worker's sessions stay: a new row continues after their generations.
      const last = row
        ? undefined
        : await tx.one<{ g: number | null }>(
            'SELECT MAX(generation) AS g FROM worker_sessions WHERE worker_id = :workerId',
            { workerId },
          );
      const current = row ? toSession(row) : null;
      const decision = decideRegistration(
        {
          current,
          disabled: row ? isTrue(row.disabled) : false,
          sessionPreviouslyUsed: owner !== undefined && current?.sessionId !== sessionId,
          lastGeneration: last?.g == null ? 0 : toInt(last.g),
        },
        sessionId,
        snapshot,
        now,
      );
      if (decision.kind === 'replay') return { outcome: 'replayed', session: current! };
      const values = {
        workerId,
        sessionId,
        generation: decision.generation,
        version: decision.version,
        leaseMs: command.leaseMs,
        maxRuns: snapshot.maxConcurrentRuns,
        slots: snapshot.availableSlots,
        registrationDigest: snapshot.digest,
        capabilities: snapshot.capabilities.canonical,
        capabilitiesDigest: snapshot.capabilities.digest,
        softwareVersion: snapshot.softwareVersion,
        protocolVersion: snapshot.protocolVersion,
      };
      let written: WorkerRow | undefined;
      if (decision.kind === 'create') {
        written = await tx.one<WorkerRow>(
          `INSERT INTO workers (worker_id, disabled, session_id, generation, version, status, lease_expires_at,
             max_concurrent_runs, available_slots, registration_digest, capabilities_json, capabilities_digest,
             software_version, protocol_version, registered_at, last_seen_at, created_at)
           VALUES (:workerId, :no, :sessionId, :generation, :version, 'online', {now + :leaseMs},
             :maxRuns, :slots, :registrationDigest, :capabilities, :capabilitiesDigest,
             :softwareVersion, :protocolVersion, {now}, {now}, {now})
           RETURNING ${COLUMNS}`,
          { ...values, no: false },
        );
      } else {
        // R-RUN-7: the slots count this session's leases only; the old session's expire on their own.
        // last_call is the old session's: the new one has applied no call yet (issue 15 item 12), and a
        // call of it one version behind would otherwise match the old key as a replay.
        written = await tx.one<WorkerRow>(
          `UPDATE workers SET session_id = :sessionId, generation = :generation, version = :version,
             status = 'online', lease_expires_at = {now + :leaseMs}, max_concurrent_runs = :maxRuns,
             available_slots = :slots, registration_digest = :registrationDigest,
             capabilities_json = :capabilities, capabilities_digest = :capabilitiesDigest,
             software_version = :softwareVersion, protocol_version = :protocolVersion,
             registered_at = {now}, last_seen_at = {now}, active_leases = 0, last_call = NULL, recovery_required = 0
           WHERE worker_id = :workerId AND session_id = :previousSessionId AND generation = :previousGeneration
           RETURNING ${COLUMNS}`,
          {
            ...values,
            previousSessionId: decision.previous.sessionId,
            previousGeneration: decision.previous.generation,
          },
        );
        await endSession(tx, decision.previous.sessionId, 'replaced');
      }
      if (!written) throw new Error('registration lost its row under the worker lock');
      await writeLabels(tx, workerId, snapshot.capabilities.capabilities.labels);
      await tx.run(
        `INSERT INTO worker_sessions (session_id, worker_id, generation, started_at, certificate_fingerprint)
         VALUES (:sessionId, :workerId, :generation, {now}, :fingerprint)`,
        {
          sessionId,
          workerId,
          generation: decision.generation,
          fingerprint: command.certificateFingerprint ?? null,
        },
      );
      return { outcome: decision.kind === 'create' ? 'created' : 'replaced', session: toSession(written) };
    });
  }

  // One compare-and-set on (worker, session, generation, version, live lease, slots <= max): the batch
  // statement the control plane runs (ADR 0018) with this call alone, so there is one heartbeat SQL.
  async heartbeat(command: HeartbeatCommand): Promise<WorkerSession> {
    const [settled] = await this.heartbeatBatch([command], 0);
    if (settled!.status === 'rejected') throw settled!.reason;
    return settled!.value.session;
  }

  /**
   * The heartbeat CAS for many calls in one statement and one commit; each call gets its own answer.
   * A worker named more than once is applied in order, one more statement per repeat (a second call of
   * one worker must see the first's commit, as it would one after the other). Misses take the same
   * explaining path as `heartbeat`, one per caller.
   */
  async heartbeatBatch(
    commands: readonly HeartbeatCommand[],
    cancelLimit: number,
  ): Promise<PromiseSettledResult<HeartbeatAnswer>[]> {
    const settled: PromiseSettledResult<HeartbeatAnswer>[] = new Array(commands.length);
    for (const round of distinctWorkerRounds(commands)) {
      const calls = round.map((i) => commands[i]!);
      const rows = await this.db.many<SessionRow & { last_call: string; cancels: string | string[] }>(
        HEARTBEAT_BATCH_SQL[this.db.dialect],
        {
          batch: JSON.stringify(
            calls.map((c) => ({
              w: c.workerId,
              s: c.sessionId,
              g: c.fence.generation,
              v: c.fence.expectedVersion,
              n: c.availableSlots,
              l: c.leaseMs,
              k: heartbeatKey(c),
              r: c.recoveryRequired ?? 0,
            })),
          ),
          no: false,
          yes: true,
          cancelLimit,
        },
      );
      // Each updated row answers the one call that names its worker (one per worker in a round), and
      // only if it is that call's own write: the version it expected, its own call key.
      const applied = new Map(rows.map((row) => [row.worker_id, row]));
      await Promise.all(
        round.map(async (index, k) => {
          const call = calls[k]!;
          const row = applied.get(call.workerId);
          try {
            settled[index] = {
              status: 'fulfilled',
              value:
                row && isOwnWrite(row, call)
                  ? { session: toSession(row), cancelAttemptIds: readCancels(row.cancels) }
                  : {
                      session: await this.explainMiss(
                        call,
                        'heartbeat',
                        call.availableSlots,
                        heartbeatKey(call),
                      ),
                      cancelAttemptIds: null,
                    },
            };
          } catch (reason) {
            settled[index] = { status: 'rejected', reason };
          }
        }),
      );
    }
    return settled;
  }

  // Same compare-and-set as heartbeat; capacity 0 from the same commit on.
  async drain(command: SessionCommand): Promise<WorkerSession> {
    const row = await this.db.one<SessionRow>(DRAIN, {
      ...fenceParams(command),
      callKey: sessionCallKey('drain'),
    });
    return row ? toSession(row) : this.explainMiss(command, 'drain', 0);
  }

  // Same compare-and-set; the session row is ended in the same transaction.
  async offline(command: SessionCommand): Promise<WorkerSession> {
    const row = await this.db.transaction(async (tx) => {
      const updated = await tx.one<SessionRow>(OFFLINE, {
        ...fenceParams(command),
        callKey: sessionCallKey('offline'),
      });
      if (updated) await endSession(tx, command.sessionId, 'offline');
      return updated;
    });
    return row ? toSession(row) : this.explainMiss(command, 'offline', 0);
  }

  // Flag and fence in one transaction: the session's version moves, so every in-flight CAS misses.
  // Enable clears the flag of a disabled worker only (409 `worker_not_disabled` otherwise, naming the
  // step that works); its session stays offline until the worker process registers again (ADR 0035).
  async setDisabled(workerId: string, disabled: boolean, audit: AuditEntry): Promise<WorkerRecord> {
    if (!disabled)
      return this.adminMove(
        workerId,
        `UPDATE workers SET disabled = :no WHERE worker_id = :workerId AND disabled = :yes
         RETURNING ${ADMIN_COLUMNS}`,
        notEnableable,
        audit,
      );
    return this.db.transaction(async (tx) => {
      await tx.lock(`worker:${workerId}`);
      const row = await tx.one<AdminWorkerRow>(
        `UPDATE workers SET disabled = :yes, version = version + 1, status = 'offline', available_slots = 0,
           lease_expires_at = {now} WHERE worker_id = :workerId RETURNING ${ADMIN_COLUMNS}`,
        { workerId, yes: true },
      );
      if (!row) throw new NotFoundError('worker');
      await endSession(tx, row.session_id, 'disabled');
      await appendAudit(tx, this.ids, audit);
      return toRecord(row);
    });
  }

  async findWorker(workerId: string): Promise<WorkerRecord | null> {
    const row = await this.db.one<AdminWorkerRow>(
      `SELECT ${ADMIN_COLUMNS} FROM workers WHERE worker_id = :workerId`,
      { workerId, yes: true },
    );
    return row ? toRecord(row) : null;
  }

  // Keyset pagination on worker_id; each filter has an index that starts with it.
  async listWorkers(query: WorkerListQuery): Promise<WorkerRecord[]> {
    const { sql, params } = listWorkersSql(COLUMNS, query);
    const rows = await this.db.many<AdminWorkerRow>(sql, params);
    return rows.map(toRecord);
  }

  async sessionCertificate(sessionId: string): Promise<string | null> {
    const row = await this.db.one<{ certificate_fingerprint: string | null }>(
      'SELECT certificate_fingerprint FROM worker_sessions WHERE session_id = :sessionId',
      { sessionId },
    );
    return row?.certificate_fingerprint ?? null;
  }

  async activeRuns(workerId: string, limit: number): Promise<WorkerActiveRun[]> {
    const rows = await this.db.many<ActiveRunRow>(ACTIVE_RUNS_SQL, { workerId, limit });
    return rows.map((r) => ({
      runId: r.run_id,
      attemptId: r.attempt_id,
      attemptNo: toInt(r.attempt_no),
      attemptStatus: r.attempt_status,
      offerId: r.offer_id,
      sessionId: r.session_id,
      leaseGeneration: toInt(r.lease_generation),
      leaseExpiresAt: toMs(r.expires_at),
      startedAt: toMsOrNull(r.started_at),
      deadlineAt: toMsOrNull(r.deadline_at),
    }));
  }

  // Status and capacity only: the version stays, so the worker's next CAS lands and reads `draining`.
  // The claim's slot reservation requires `status = 'online'` in its own CAS, so no lease is granted
  // from this commit on.
  async drainWorker(workerId: string, audit: AuditEntry): Promise<WorkerRecord> {
    return this.adminMove(
      workerId,
      `UPDATE workers SET status = 'draining', available_slots = 0
       WHERE worker_id = :workerId AND disabled = :no AND status <> 'offline' AND lease_expires_at > {now}
       RETURNING ${ADMIN_COLUMNS}`,
      notDrainable,
      audit,
    );
  }

  // The reverse of drainWorker, version kept for the same reason: the worker's next heartbeat answer
  // says `online` and it offers its slots again (ADR 0035). Capacity comes back whole at once
  // (active_leases still bounds the claim); the worker's next heartbeats report its own.
  async resumeWorker(workerId: string, audit: AuditEntry): Promise<WorkerRecord> {
    return this.adminMove(
      workerId,
      `UPDATE workers SET available_slots = CASE WHEN status = 'draining' THEN max_concurrent_runs
           ELSE available_slots END, status = 'online'
       WHERE worker_id = :workerId AND disabled = :no AND status IN ('online', 'draining') AND lease_expires_at > {now}
       RETURNING ${ADMIN_COLUMNS}`,
      notResumable,
      audit,
    );
  }

  /** One admin write under the worker lock; a miss is 404 or the 409 `refuse` names for its status. */
  private adminMove(
    workerId: string,
    update: string,
    refuse: (workerId: string, status: WorkerStatus) => Error,
    audit: AuditEntry,
  ): Promise<WorkerRecord> {
    return this.db.transaction(async (tx) => {
      await tx.lock(`worker:${workerId}`);
      const row = await tx.one<AdminWorkerRow>(update, { workerId, no: false, yes: true });
      if (!row) {
        const found = await tx.one<AdminWorkerRow>(
          `SELECT ${ADMIN_COLUMNS} FROM workers WHERE worker_id = :workerId`,
          { workerId, yes: true },
        );
        if (!found) throw new NotFoundError('worker');
        throw refuse(workerId, found.effective_status);
      }
      await appendAudit(tx, this.ids, audit);
      return toRecord(row);
    });
  }

  async deleteWorker(workerId: string, audit: AuditEntry): Promise<WorkerRecord> {
    return this.db.transaction(async (tx) => {
      await tx.lock(`worker:${workerId}`);
      const row = await tx.one<AdminWorkerRow & { held: number | null }>(
        `SELECT ${ADMIN_COLUMNS},
           (SELECT 1 FROM run_leases WHERE worker_id = :workerId AND state = 'active' LIMIT 1) AS held
         FROM workers WHERE worker_id = :workerId {forUpdate}`,
        { workerId, yes: true },
      );
      if (!row) throw new NotFoundError('worker');
      const refused = notDeletable(workerId, row.effective_status, row.held !== null);
      if (refused) throw refused;
      await tx.run('DELETE FROM worker_labels WHERE worker_id = :workerId', { workerId });
      await tx.run('DELETE FROM workers WHERE worker_id = :workerId', { workerId });
      await endSession(tx, row.session_id, 'deleted');
      // Its issued certificates go with it: a deleted worker enrolls again (ADR 0045 §3).
      await revokeIssuedCertificates(tx, workerId, 'worker deleted');
      await appendAudit(tx, this.ids, audit);
      return toRecord(row);
    });
  }

  /**
   * The CAS missed: answer an exact replay of the last applied call with the session as it stands
   * (read-only), else read the row and name the reason (or the bad slot count).
   */
  private async explainMiss(
    command: SessionCommand,
    action: SessionAction,
    slots: number,
    callKey = sessionCallKey(action, slots),
  ): Promise<WorkerSession> {
    const row = await this.db.one<WorkerRow & { last_call: string | null; now: number | Date }>(
      `SELECT ${COLUMNS}, last_call, {now} AS now FROM workers WHERE worker_id = :workerId`,
      { workerId: command.workerId },
    );
    const current = row ? toSession(row) : null;
    const disabled = row ? isTrue(row.disabled) : false;
    const now = row ? toMs(row.now) : 0;
    if (
      isReplayOfLastCall(
        current,
        row?.last_call ?? null,
        disabled,
        command.sessionId,
        callKey,
        command.fence,
        now,
      )
    ) {
      return current!;
    }
    const reason = fenceViolation(current, disabled, command.sessionId, command.fence, now);
    if (reason) throw new FencedError('session', reason);
    if (action === 'heartbeat' && current && slots > current.maxConcurrentRuns) {
      throw new ValidationError('availableSlots', 'above_maximum');
    }
    // The row moved between the CAS and this read; versions only grow, so the caller's is stale.
    throw new FencedError('session', 'version_mismatch');
  }
}

/** Indexes of `commands` in rounds where each worker appears at most once, first come first. */
function distinctWorkerRounds(commands: readonly { workerId: string }[]): number[][] {
  const rounds: number[][] = [];
  const seen = new Map<string, number>();
  commands.forEach((c, i) => {
    const r = seen.get(c.workerId) ?? 0;
    seen.set(c.workerId, r + 1);
    (rounds[r] ??= []).push(i);
  });
  return rounds;
}

function isOwnWrite(row: SessionRow & { last_call: string }, call: HeartbeatCommand): boolean {
  return (
    row.session_id === call.sessionId &&
    toInt(row.generation) === call.fence.generation &&
    toInt(row.version) === call.fence.expectedVersion + 1 &&
    row.last_call === heartbeatKey(call)
  );
}

/** A heartbeat's call key names everything its body asks (R-WRK-7): slots and recovery count. */
function heartbeatKey(call: HeartbeatCommand): string {
  return sessionCallKey('heartbeat', call.availableSlots, call.recoveryRequired ?? 0);
}

/** PostgreSQL answers json (parsed by the driver), SQLite its text. */
function readCancels(value: string | string[]): string[] {
  return typeof value === 'string' ? (JSON.parse(value) as string[]) : value;
}

async function endSession(tx: SqlTransaction, sessionId: string, reason: string): Promise<void> {
  await tx.run(
    `UPDATE worker_sessions SET ended_at = {now}, end_reason = :reason WHERE session_id = :sessionId AND ended_at IS NULL`,
    { sessionId, reason },
  );
}

function toRecord(row: AdminWorkerRow): WorkerRecord {
  return {
    workerId: row.worker_id,
    disabled: isTrue(row.disabled),
    status: row.effective_status,
    session: toSession(row),
    capabilities: JSON.parse(row.capabilities_json) as unknown,
    capabilitiesDigest: row.capabilities_digest,
    softwareVersion: row.software_version,
    protocolVersion: toInt(row.protocol_version),
    registeredAt: toMs(row.registered_at),
    lastSeenAt: toMs(row.last_seen_at),
    recoveryRequired: toInt(row.recovery_required),
    certificate:
      row.certificate_not_after === null
        ? null
        : {
            issuedAt: toMs(row.certificate_issued_at!),
            notAfter: toMs(row.certificate_not_after),
            fingerprint: row.certificate_fingerprint!,
          },
  };
}
