import { AuditEntry, IdGenerator } from '@ql/domain';
import { SqlExecutor } from './sql-executor';

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
