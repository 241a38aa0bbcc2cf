import { TaskRevisionRecord, TaskSpec } from '@ql/domain';
import { SqlExecutor, toInt, toMs } from './sql-executor';

/** Task revisions as rows, read by the task repository and by the run paths that pin one. */

export interface RevisionRow {
  task_id: string;
  revision: number;
  digest: string;
  spec_json: string;
  created_at: number | Date;
}

export const REVISION_COLUMNS = 'task_id, revision, digest, spec_json, created_at';

/** Revisions are immutable, so a bounded cache of them is always right (on any replica). */
const revisionCache = new Map<string, TaskRevisionRecord>();

/** Reads through the cache; pass the transaction when inside one. */
export async function readRevision(
  on: SqlExecutor,
  taskId: string,
  revision: number,
): Promise<TaskRevisionRecord | null> {
  const key = `${taskId}:${revision}`;
  const cached = revisionCache.get(key);
  if (cached) return cached;
  const row = await on.one<RevisionRow>(
    `SELECT ${REVISION_COLUMNS} FROM task_revisions WHERE task_id = :taskId AND revision = :revision`,
    { taskId, revision },
  );
  if (!row) return null;
  const record = toRevision(row);
  if (revisionCache.size >= 1024) revisionCache.delete(revisionCache.keys().next().value!);
  revisionCache.set(key, record);
  return record;
}

export function toRevision(row: RevisionRow): TaskRevisionRecord {
  return {
    taskId: row.task_id,
    revision: toInt(row.revision),
    digest: row.digest,
    spec: JSON.parse(row.spec_json) as TaskSpec,
    specBytes: Buffer.byteLength(row.spec_json, 'utf8'),
    createdAt: toMs(row.created_at),
  };
}
