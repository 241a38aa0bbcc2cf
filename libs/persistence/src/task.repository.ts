import {
  AuditEntry,
  CanonicalTaskSpec,
  ConflictError,
  IdGenerator,
  NotFoundError,
  PageQuery,
  TaskRecord,
  TaskRepository,
  TaskRevisionRecord,
  TaskListItem,
  TaskListQuery,
  TaskSpec,
  searchFold,
  taskSearchText,
} from '@ql/domain';
import { appendAudit } from './audit-sql';
import { lockPinnedBundle } from './bundle-sql';
import { REVISION_COLUMNS, RevisionRow, readRevision, toRevision } from './revision-sql';
import { syncTaskSecretUses } from './secret-sql';
import { SqlDatabase, SqlExecutor, isTrue, isUniqueViolation, toInt, toMs } from './sql-executor';

interface TaskRow {
  id: string;
  name: string;
  revision: number;
  digest: string;
  spec_json: string;
  enabled: number | boolean;
  pinned: number | boolean;
  created_at: number | Date;
  updated_at: number | Date;
}

const TASK_COLUMNS = 'id, name, revision, digest, spec_json, enabled, pinned, created_at, updated_at';

/** Tasks on either dialect; every edit that changes the digest appends an immutable revision. */
export class SqlTaskRepository implements TaskRepository {
  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
  ) {}

  // One transaction: task row, revision 1 and the audit entry; the live-name unique index decides races.
  async create(id: string, spec: CanonicalTaskSpec, audit: AuditEntry): Promise<TaskRecord> {
    try {
      return await this.db.transaction(async (tx) => {
        if (spec.spec.bundle) await lockPinnedBundle(tx, spec.spec.bundle.digest);
        const row = await tx.one<TaskRow>(
          `INSERT INTO tasks (id, name, revision, digest, spec_json, cron, bundle_digest, search_text, created_at,
             updated_at)
           VALUES (:id, :name, 1, :digest, :spec, :cron, :bundle, :search, {now}, {now}) RETURNING ${TASK_COLUMNS}`,
          {
            id,
            name: spec.spec.name,
            search: taskSearchText(spec.spec),
            digest: spec.digest,
            spec: spec.canonical,
            cron: spec.spec.cron,
            bundle: spec.spec.bundle?.digest ?? null,
          },
        );
        await insertRevision(tx, id, 1, spec);
        await syncTaskSecretUses(tx, id, spec.spec);
        await appendAudit(tx, this.ids, audit);
        return toTask(row!);
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictError('task_name_taken', 'a live task has this name');
      throw error;
    }
  }

  // Row-locked read, then revision + 1 only if the digest differs; the audit entry commits with it.
  async update(id: string, spec: CanonicalTaskSpec, audit: AuditEntry) {
    try {
      return await this.db.transaction(async (tx) => {
        const current = await tx.one<TaskRow>(
          `SELECT ${TASK_COLUMNS} FROM tasks WHERE id = :id AND deleted_at IS NULL {forUpdate}`,
          { id },
        );
        if (!current) throw new NotFoundError('task');
        if (current.digest === spec.digest) return { task: toTask(current), changed: false };
        if (spec.spec.bundle) await lockPinnedBundle(tx, spec.spec.bundle.digest);
        const revision = toInt(current.revision) + 1;
        const row = await tx.one<TaskRow>(
          `UPDATE tasks SET name = :name, revision = :revision, digest = :digest, spec_json = :spec, cron = :cron,
             bundle_digest = :bundle, search_text = :search, updated_at = {now}
           WHERE id = :id AND revision = :previous RETURNING ${TASK_COLUMNS}`,
          {
            search: taskSearchText(spec.spec),
            bundle: spec.spec.bundle?.digest ?? null,
            id,
            name: spec.spec.name,
            revision,
            previous: revision - 1,
            digest: spec.digest,
            spec: spec.canonical,
            cron: spec.spec.cron,
          },
        );
        await insertRevision(tx, id, revision, spec);
        await syncTaskSecretUses(tx, id, spec.spec);
        await appendAudit(tx, this.ids, { ...audit, detail: { ...audit.detail, revision } });
        return { task: toTask(row!), changed: true };
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictError('task_name_taken', 'a live task has this name');
      throw error;
    }
  }

  async find(id: string): Promise<TaskRecord | null> {
    const row = await this.db.one<TaskRow>(
      `SELECT ${TASK_COLUMNS} FROM tasks WHERE id = :id AND deleted_at IS NULL`,
      { id },
    );
    return row ? toTask(row) : null;
  }

  /**
   * Pinned first, then creation order (ids are UUIDv7); keyset on (pinned, id) with the last task's id
   * as the cursor (its pinned flag read in the statement). `q` matches the folded name and command,
   * `lastStatus` the status of the task's newest run (index `runs_task`).
   */
  async list(query: TaskListQuery): Promise<TaskListItem[]> {
    const where = ['t.deleted_at IS NULL'];
    const params: Record<string, string | number | boolean> = { limit: query.limit };
    if (query.after) {
      where.push(`(t.pinned < (SELECT pinned FROM tasks WHERE id = :after)
        OR (t.pinned = (SELECT pinned FROM tasks WHERE id = :after) AND t.id > :after))`);
      params.after = query.after;
    }
    if (query.q) {
      // The needle's own % and _ are literal: escaped for LIKE.
      where.push(`t.search_text LIKE :needle ESCAPE '\\'`);
      params.needle = `%${searchFold(query.q).replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    }
    if (query.enabled !== undefined) {
      where.push('t.enabled = :enabled');
      params.enabled = query.enabled;
    }
    const last = (column: string) =>
      `(SELECT r.${column} FROM runs r WHERE r.task_id = t.id ORDER BY r.id DESC LIMIT 1)`;
    const rows = await this.db.many<TaskRow & { last_run_id: string | null; last_status: string | null }>(
      `SELECT * FROM (
         SELECT ${TASK_COLUMNS.split(', ')
           .map((c) => `t.${c}`)
           .join(', ')}, ${last('id')} AS last_run_id, ${last('status')} AS last_status
         FROM tasks t WHERE ${where.join(' AND ')}
       ) page ${query.lastStatus ? 'WHERE last_status = :lastStatus' : ''}
       ORDER BY pinned DESC, id LIMIT :limit`,
      query.lastStatus ? { ...params, lastStatus: query.lastStatus } : params,
    );
    return rows.map((row) => ({
      ...toTask(row),
      lastRun: row.last_run_id ? { id: row.last_run_id, status: row.last_status! } : null,
    }));
  }

  /** Enable, disable, pin or unpin: the task's state, not a revision; one audit row. */
  async setState(
    id: string,
    state: { enabled?: boolean; pinned?: boolean },
    audit: AuditEntry,
  ): Promise<TaskRecord> {
    return this.db.transaction(async (tx) => {
      const row = await tx.one<TaskRow>(
        `UPDATE tasks SET enabled = COALESCE(:enabled, enabled), pinned = COALESCE(:pinned, pinned),
           updated_at = {now} WHERE id = :id AND deleted_at IS NULL RETURNING ${TASK_COLUMNS}`,
        { id, enabled: state.enabled ?? null, pinned: state.pinned ?? null },
      );
      if (!row) throw new NotFoundError('task');
      await appendAudit(tx, this.ids, audit);
      return toTask(row);
    });
  }

  async delete(id: string, audit: AuditEntry): Promise<TaskRecord> {
    return this.db.transaction(async (tx) => {
      const row = await tx.one<TaskRow>(
        `UPDATE tasks SET deleted_at = {now}, updated_at = {now} WHERE id = :id AND deleted_at IS NULL
         RETURNING ${TASK_COLUMNS}`,
        { id },
      );
      if (!row) throw new NotFoundError('task');
      await syncTaskSecretUses(tx, id, null);
      await appendAudit(tx, this.ids, audit);
      return toTask(row);
    });
  }

  async listRevisions(id: string, query: { beforeRevision?: number; limit: number }) {
    const exists = await this.db.one<{ id: string }>('SELECT id FROM tasks WHERE id = :id', { id });
    if (!exists) throw new NotFoundError('task');
    const rows = await this.db.many<RevisionRow>(
      `SELECT ${REVISION_COLUMNS} FROM task_revisions WHERE task_id = :id
       ${query.beforeRevision ? 'AND revision < :before' : ''} ORDER BY revision DESC LIMIT :limit`,
      { id, limit: query.limit, ...(query.beforeRevision ? { before: query.beforeRevision } : {}) },
    );
    return rows.map(toRevision);
  }

  async findRevision(taskId: string, revision: number): Promise<TaskRevisionRecord | null> {
    return readRevision(this.db, taskId, revision);
  }

  async names(ids: readonly string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const params = Object.fromEntries(ids.map((id, i) => [`t${i}`, id]));
    const rows = await this.db.many<{ id: string; name: string }>(
      `SELECT id, name FROM tasks WHERE id IN (${ids.map((_, i) => `:t${i}`).join(', ')})`,
      params,
    );
    return new Map(rows.map((r) => [r.id, r.name]));
  }

  async listScheduled(query: PageQuery): Promise<TaskRecord[]> {
    const rows = await this.db.many<TaskRow>(
      `SELECT ${TASK_COLUMNS} FROM tasks WHERE cron IS NOT NULL AND deleted_at IS NULL AND enabled = :yes
       ${query.after ? 'AND id > :after' : ''} ORDER BY id LIMIT :limit`,
      { limit: query.limit, yes: true, ...(query.after ? { after: query.after } : {}) },
    );
    return rows.map(toTask);
  }
}

async function insertRevision(
  tx: SqlExecutor,
  taskId: string,
  revision: number,
  spec: CanonicalTaskSpec,
): Promise<void> {
  await tx.run(
    `INSERT INTO task_revisions (task_id, revision, digest, spec_json, bundle_digest, created_at)
     VALUES (:taskId, :revision, :digest, :spec, :bundle, {now})`,
    { taskId, revision, digest: spec.digest, spec: spec.canonical, bundle: spec.spec.bundle?.digest ?? null },
  );
}

function toTask(row: TaskRow): TaskRecord {
  return {
    id: row.id,
    name: row.name,
    revision: toInt(row.revision),
    digest: row.digest,
    spec: JSON.parse(row.spec_json) as TaskSpec,
    enabled: isTrue(row.enabled),
    pinned: isTrue(row.pinned),
    createdAt: toMs(row.created_at),
    updatedAt: toMs(row.updated_at),
  };
}
