import {
  AttemptDetail,
  AuditEntry,
  ConflictError,
  IdGenerator,
  NotFoundError,
  PlacementCandidate,
  RunEvent,
  RunListQuery,
  RunEnvVar,
  RunRecord,
  RunRepository,
  TaskSpec,
  TriggerRunCommand,
  canonicalJson,
  isTerminalRun,
  withTaskRequirements,
  withWireRequirement,
  runWireVersion,
} from '@ql/domain';
import { appendAudit } from './audit-sql';
import {
  ATTEMPT_COLUMNS,
  AttemptRow,
  EventRow,
  RUN_COLUMNS,
  RunRow,
  appendEvents,
  toAttempt,
  toEvent,
  toRun,
  transitionAttempt,
  transitionRun,
} from './run-sql';
import { CANDIDATE_COLUMNS, CandidateRow, toCandidates } from './placement-candidates';
import { pinEnvVars, readRunEnvVars, recordEnvVars } from './run-env-vars';
import { SqlDatabase, toInt, toMs } from './sql-executor';

/** Runs, attempts and events on either dialect (R-RUN-2..5). */
export class SqlRunRepository implements RunRepository {
  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
  ) {}

  // One transaction: the run pinned to the task's current revision and its first event. Unique keys
  // (idempotency key, cron key) decide races between requests and replicas: ON CONFLICT DO NOTHING.
  async trigger(command: TriggerRunCommand): Promise<{ run: RunRecord; created: boolean } | null> {
    const existing = command.idempotency ? await this.byIdempotencyKey(command.idempotency) : null;
    if (existing) return { run: existing, created: false };
    const created = await this.db.transaction(async (tx) => {
      const task = await tx.one<{ revision: number; digest: string; spec_json: string }>(
        `SELECT revision, digest, spec_json FROM tasks WHERE id = :taskId AND deleted_at IS NULL`,
        { taskId: command.taskId },
      );
      if (!task) throw new NotFoundError('task');
      const revision = toInt(task.revision);
      if (command.revision !== undefined && command.revision !== revision) return null;
      const spec = JSON.parse(task.spec_json) as TaskSpec;
      // The global env vars this run receives (ADR 0061): recorded with it, merged into its spec.
      const pinned = await pinEnvVars(tx, spec);
      // What the task implies, and the wire version its merged spec needs (ADR 0062).
      const placement = withWireRequirement(
        withTaskRequirements(spec.placement, spec.executor, spec.runtime),
        runWireVersion(
          spec,
          pinned.vars.some((v) => v.secret),
        ),
      );
      // One run per (task, scheduled time) whatever the revision: an edit never fires a time a second time.
      const cronKey = command.scheduledAt === undefined ? null : `${command.taskId}:${command.scheduledAt}`;
      const row = await tx.one<RunRow>(
        `INSERT INTO runs (id, task_id, revision, spec_digest, placement_json, status, version, event_seq,
           priority, queue_order, trigger_kind, idempotency_key, idempotency_digest, cron_key, scheduled_at,
           attempt_count, current_attempt_id, cancel_requested, next_attempt_at, created_at, updated_at)
         VALUES (:id, :taskId, :revision, :digest, :placement, 'queued', 0, 1, :priority, {nowMs}, :trigger,
           :key, :keyDigest, :cronKey, ${command.scheduledAt === undefined ? 'NULL' : '{ms :scheduledAt}'},
           0, NULL, :no, NULL, {now}, {now})
         ON CONFLICT DO NOTHING
         RETURNING ${RUN_COLUMNS}`,
        {
          id: command.runId,
          taskId: command.taskId,
          revision,
          digest: pinned.digest ?? task.digest,
          placement: canonicalJson(placement),
          priority: command.priority ?? spec.priority,
          trigger: command.trigger,
          key: command.idempotency?.key ?? null,
          keyDigest: command.idempotency?.digest ?? null,
          cronKey,
          no: false,
          ...(command.scheduledAt === undefined ? {} : { scheduledAt: command.scheduledAt }),
        },
      );
      if (!row) return null;
      await recordEnvVars(tx, row.id, pinned.vars);
      await appendEvents(tx, row.id, 1, [
        {
          type: 'run.created',
          detail: { trigger: command.trigger, revision, priority: toInt(row.priority) },
        },
      ]);
      if (command.audit) await appendAudit(tx, this.ids, command.audit);
      return toRun(row);
    });
    if (created) return { run: created, created: true };
    if (!command.idempotency) return null;
    // Lost the race to a concurrent request with the same key: answer with its run.
    const winner = await this.byIdempotencyKey(command.idempotency);
    if (!winner) throw new ConflictError('idempotency_key_reused');
    return { run: winner, created: false };
  }

  private async byIdempotencyKey(key: { key: string; digest: string }): Promise<RunRecord | null> {
    const row = await this.db.one<RunRow & { idempotency_digest: string }>(
      `SELECT ${RUN_COLUMNS}, idempotency_digest FROM runs WHERE idempotency_key = :key`,
      { key: key.key },
    );
    if (!row) return null;
    if (row.idempotency_digest !== key.digest) {
      throw new ConflictError('idempotency_key_reused', 'this Idempotency-Key was used for another request');
    }
    return toRun(row);
  }

  async find(id: string): Promise<RunRecord | null> {
    const row = await this.db.one<RunRow>(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = :id`, { id });
    return row ? toRun(row) : null;
  }

  // Keyset on id, newest first (UUIDv7 ids sort by creation time). A worker's runs: its attempts' run ids
  // from the `attempts_worker (worker_id, run_id)` index, the keyset applied inside too.
  async list(query: RunListQuery): Promise<RunRecord[]> {
    const where = [
      query.status ? 'status = :status' : null,
      query.taskId ? 'task_id = :taskId' : null,
      query.workerId
        ? `id IN (SELECT run_id FROM attempts WHERE worker_id = :workerId${query.before ? ' AND run_id < :before' : ''})`
        : null,
      query.before ? 'id < :before' : null,
    ].filter(Boolean);
    const rows = await this.db.many<RunRow>(
      `SELECT ${RUN_COLUMNS} FROM runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY id DESC LIMIT :limit`,
      {
        limit: query.limit,
        ...(query.status ? { status: query.status } : {}),
        ...(query.taskId ? { taskId: query.taskId } : {}),
        ...(query.workerId ? { workerId: query.workerId } : {}),
        ...(query.before ? { before: query.before } : {}),
      },
    );
    return rows.map(toRun);
  }

  async attempts(runId: string): Promise<AttemptDetail[]> {
    const rows = await this.db.many<AttemptRow & { error_code: string | null; error_summary: string | null }>(
      `SELECT ${ATTEMPT_COLUMNS}, error_code, error_summary FROM attempts WHERE run_id = :runId ORDER BY attempt_no`,
      { runId },
    );
    return rows.map((row) => ({
      ...toAttempt(row),
      errorCode: row.error_code,
      errorSummary: row.error_summary,
    }));
  }

  envVars(runId: string): Promise<RunEnvVar[]> {
    return readRunEnvVars(this.db, runId);
  }

  async events(runId: string, query: { afterSeq: number; limit: number }): Promise<RunEvent[]> {
    const rows = await this.db.many<EventRow>(
      `SELECT run_id, seq, type, attempt_id, at, detail FROM run_events
       WHERE run_id = :runId AND seq > :after ORDER BY seq LIMIT :limit`,
      { runId, after: query.afterSeq, limit: query.limit },
    );
    return rows.map(toEvent);
  }

  // Row-locked; the flag commits first (R-RUN-5). Nobody holds a queued or retry_wait run, so it ends now.
  async requestCancel(runId: string, audit: AuditEntry): Promise<RunRecord> {
    return this.db.transaction(async (tx) => {
      const row = await tx.one<RunRow>(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = :runId {forUpdate}`, {
        runId,
      });
      if (!row) throw new NotFoundError('run');
      const run = toRun(row);
      if (isTerminalRun(run.status)) throw new ConflictError('run_finished', `run is already ${run.status}`);
      if (run.cancelRequested) return run;
      await appendAudit(tx, this.ids, audit);
      const idle = run.status === 'queued' || run.status === 'retry_wait';
      if (idle && run.currentAttemptId) {
        // A claimed attempt whose lease ended before it started: it will never start now.
        const attempt = await tx.one<AttemptRow>(`SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE id = :id`, {
          id: run.currentAttemptId,
        });
        if (attempt && attempt.status === 'claimed') {
          await transitionAttempt(tx, { ...toAttempt(attempt) }, 'cancelled');
        }
      }
      const updated = await transitionRun(
        tx,
        run,
        idle ? 'cancelled' : run.status,
        idle
          ? [{ type: 'run.cancel_requested' }, { type: 'run.finished', detail: { status: 'cancelled' } }]
          : [{ type: 'run.cancel_requested' }],
        { cancelRequested: true },
      );
      if (!updated) throw new Error('run moved under its row lock');
      return toRun(updated);
    });
  }

  // Capabilities documents are read only for digests this replica has not parsed yet.
  async placementCandidates(limit: number): Promise<{ now: number; candidates: PlacementCandidate[] }> {
    const rows = await this.db.many<CandidateRow & { now: number | Date }>(
      `SELECT ${CANDIDATE_COLUMNS}, {now} AS now FROM workers w ORDER BY w.worker_id LIMIT :limit`,
      { limit },
    );
    const now = rows[0] ? toMs(rows[0].now) : Date.now();
    return { now, candidates: await toCandidates(this.db, rows) };
  }
}
