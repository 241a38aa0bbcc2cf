import { ConflictError, WorkerListQuery, WorkerStatus } from '@ql/domain';
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

/**
 * The effective status (ADR 0035) by the database's clock; binds `:yes`. Keep equal to STATUS_FILTER
 * and to the `/metrics` count (stats.repository.ts reads this expression too).
 */
export const WORKER_STATUS_SQL = `CASE WHEN disabled = :yes THEN 'disabled' WHEN status = 'offline' THEN 'offline'
  WHEN lease_expires_at <= {now} THEN 'expired' ELSE status END`;

/**
 * `?status=` as a WHERE clause equal to `WORKER_STATUS_SQL = :status`, written per status so the
 * stored status leads it (the `workers_status (status, worker_id)` index) and the keyset on worker_id
 * stays one ordered scan; the lease is compared with the database's now.
 */
const STATUS_FILTER: Readonly<Record<WorkerStatus, string>> = {
  online: `disabled = :no AND status = 'online' AND lease_expires_at > {now}`,
  draining: `disabled = :no AND status = 'draining' AND lease_expires_at > {now}`,
  expired: `disabled = :no AND status IN ('online', 'draining') AND lease_expires_at <= {now}`,
  offline: `disabled = :no AND status = 'offline'`,
  disabled: `disabled = :yes`,
};

/**
 * The worker's current certificate (issued by enrollment or renewal, neither superseded nor revoked:
 * at most one, the partial unique index `worker_certificates_current`), one column of it. A scalar
 * subquery, so the admin writes' `UPDATE … RETURNING` read it too; null for a hand-made certificate.
 */
const currentCertificate = (column: string) =>
  `(SELECT c.${column} FROM worker_certificates c WHERE c.worker_id = workers.worker_id
    AND c.superseded_by IS NULL AND c.revoked_at IS NULL) AS certificate_${column}`;

/** What the admin views read: the stored columns, the effective status, the current certificate's life and fingerprint. */
export const adminColumns = (columns: string) =>
  `${columns}, ${WORKER_STATUS_SQL} AS effective_status, ${currentCertificate('issued_at')},
  ${currentCertificate('not_after')}, ${currentCertificate('fingerprint')}`;

/** Keyset on worker_id; every filter is optional and they combine with AND. */
export function listWorkersSql(columns: string, query: WorkerListQuery): { sql: string; params: SqlParams } {
  const where = [
    'worker_id > :after',
    query.status ? STATUS_FILTER[query.status] : null,
    query.capabilitiesDigest ? 'capabilities_digest = :digest' : null,
    query.label
      ? `worker_id IN (SELECT worker_id FROM worker_labels WHERE key = :labelKey AND value = :labelValue)`
      : null,
  ].filter(Boolean);
  return {
    sql: `SELECT ${adminColumns(columns)} FROM workers WHERE ${where.join(' AND ')} ORDER BY worker_id LIMIT :limit`,
    params: {
      after: query.afterWorkerId ?? '',
      limit: query.limit,
      yes: true,
      no: false,
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

/*
 * The admin state machine's refusals (ADR 0035): each names the worker's effective status and the next
 * step that works, as an operator would type it. Nothing was written when one is thrown.
 */
const path = (workerId: string, action = '') => `/api/v1/workers/${workerId}${action}`;

const GONE: Readonly<Record<'expired' | 'offline' | 'disabled', (id: string) => string>> = {
  expired: (id) =>
    `its session lease has expired (the worker process stopped or lost the control plane); start the worker again, or DELETE ${path(id)}`,
  offline: (id) => `it is offline; start the worker again, or DELETE ${path(id)}`,
  disabled: (id) =>
    `it is disabled; POST ${path(id, '/enable')} and start the worker again, or DELETE ${path(id)}`,
};

/** drain: only a live session (online, or draining again). */
export function notDrainable(workerId: string, status: WorkerStatus): ConflictError {
  const why =
    status === 'online' || status === 'draining' ? 'it moved meanwhile; try again' : GONE[status](workerId);
  return new ConflictError('worker_not_online', `the worker has no live session to drain: ${why}`);
}

/** resume: only a live session (draining, or online again). */
export function notResumable(workerId: string, status: WorkerStatus): ConflictError {
  const why =
    status === 'online' || status === 'draining' ? 'it moved meanwhile; try again' : GONE[status](workerId);
  return new ConflictError(
    'worker_not_draining',
    `the worker has no live session to resume: ${why} (a worker process registers online)`,
  );
}

/** enable: only a disabled worker; a draining one wants resume. */
export function notEnableable(workerId: string, status: WorkerStatus): ConflictError {
  const next: Record<Exclude<WorkerStatus, 'disabled'>, string> = {
    online: 'it is online and takes runs',
    draining: `it is draining; POST ${path(workerId, '/resume')} makes it take runs again`,
    expired: 'its session lease has expired; start the worker again',
    offline: 'it is offline; start the worker again',
  };
  return new ConflictError(
    'worker_not_disabled',
    `the worker is not disabled: ${status === 'disabled' ? 'it moved meanwhile; try again' : next[status]}`,
  );
}

/** delete: no live session (offline, expired or disabled) and no lease still active; null when allowed. */
export function notDeletable(
  workerId: string,
  status: WorkerStatus,
  holdsLeases: boolean,
): ConflictError | null {
  if (status === 'online' || status === 'draining')
    return new ConflictError(
      'worker_not_offline',
      `the worker is ${status}: its process still holds a live session; stop the worker process (SIGTERM: it finishes its runs and goes offline) or POST ${path(workerId, '/disable')}, then delete it`,
    );
  if (holdsLeases)
    return new ConflictError(
      'worker_holds_leases',
      `the worker is ${status} but a lease of it is still active; delete it once its runs ended or the lease sweeper ended the expired leases (GET ${path(workerId)} lists its active runs)`,
    );
  return null;
}
