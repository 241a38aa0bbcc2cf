import { AuditEntry, AuditRepository, IdGenerator } from '@ql/domain';
import { SqlDatabase, SqlExecutor, toMs } from './sql-executor';

/** Appends one audit entry inside the caller's transaction, so the record and the change commit together. */
export async function appendAudit(tx: SqlExecutor, ids: IdGenerator, entry: AuditEntry): Promise<void> {
  await tx.run(
    `INSERT INTO audit_log (id, at, actor, action, target, detail) VALUES (:id, {now}, :actor, :action, :target, :detail)`,
    {
      id: ids.uuidV7(),
      actor: entry.actor,
      action: entry.action,
      target: entry.target,
      detail: entry.detail ? JSON.stringify(entry.detail) : null,
    },
  );
}

interface AuditRow {
  id: string;
  at: number | Date;
  actor: string;
  action: string;
  target: string;
  detail: string | Record<string, unknown> | null;
}

export class SqlAuditRepository implements AuditRepository {
  constructor(private readonly db: SqlDatabase) {}

  async list(limit: number) {
    const rows = await this.db.many<AuditRow>(
      'SELECT id, at, actor, action, target, detail FROM audit_log ORDER BY at DESC, id DESC LIMIT :limit',
      { limit },
    );
    return rows.map((r) => ({
      id: r.id,
      at: toMs(r.at),
      actor: r.actor,
      action: r.action,
      target: r.target,
      ...(r.detail ? { detail: typeof r.detail === 'string' ? JSON.parse(r.detail) : r.detail } : {}),
    }));
  }
}
