import { WorkerListQuery } from '@ql/domain';
import { SqlParams, SqlTransaction } from './sql-executor';

/**
 * The admin reads and writes of workers beyond their sessions (R-ADM-1): the filtered list, the live
 * leases a worker holds, and its labels kept as rows so a label filter is an index lookup.
 */

export interface ActiveRunRow {
  run_id: string;
  attempt_id: string;
  attempt_no: number;
  attempt_status: string;
  offer_id: string;
  session_id: string;
  lease_generation: number;
  expires_at: number | Date;
  started_at: number | Date | null;
  deadline_at: number | Date | null;
}

/** Live = still `active` and not yet expired by the clock; never the token digest. */
export const ACTIVE_RUNS_SQL = `SELECT l.run_id, l.attempt_id, a.attempt_no, a.status AS attempt_status, l.offer_id,
    l.session_id, l.lease_generation, l.expires_at, a.started_at, a.deadline_at
  FROM run_leases l JOIN attempts a ON a.id = l.attempt_id
  WHERE l.worker_id = :workerId AND l.state = 'active' AND l.expires_at > {now}
  ORDER BY l.expires_at, l.offer_id LIMIT :limit`;

/** Keyset on worker_id; every filter is optional and they combine with AND. */
export function listWorkersSql(columns: string, query: WorkerListQuery): { sql: string; params: SqlParams } {
  const where = [
    'worker_id > :after',
    query.status ? 'status = :status' : null,
    query.capabilitiesDigest ? 'capabilities_digest = :digest' : null,
    query.label
      ? `worker_id IN (SELECT worker_id FROM worker_labels WHERE key = :labelKey AND value = :labelValue)`
      : null,
  ].filter(Boolean);
  return {
    sql: `SELECT ${columns} FROM workers WHERE ${where.join(' AND ')} ORDER BY worker_id LIMIT :limit`,
    params: {
      after: query.afterWorkerId ?? '',
      limit: query.limit,
      ...(query.status ? { status: query.status } : {}),
      ...(query.capabilitiesDigest ? { digest: query.capabilitiesDigest } : {}),
      ...(query.label ? { labelKey: query.label.key, labelValue: query.label.value } : {}),
    },
  };
}

/** Replaces a worker's label rows with the ones its new session declared (≤ 32, under its lock). */
export async function writeLabels(
  tx: SqlTransaction,
  workerId: string,
  labels: Readonly<Record<string, string>>,
): Promise<void> {
  await tx.run('DELETE FROM worker_labels WHERE worker_id = :workerId', { workerId });
  for (const [key, value] of Object.entries(labels))
    await tx.run('INSERT INTO worker_labels (worker_id, key, value) VALUES (:workerId, :key, :value)', {
      workerId,
      key,
      value,
    });
}
