import { AuditRepository } from '@ql/domain';
import { SqlDatabase, toMs } from './sql-executor';

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
