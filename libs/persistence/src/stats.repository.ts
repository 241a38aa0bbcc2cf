import {
  OperationalCounts,
  OperationalStatsRepository,
  RUN_STATUSES,
  WORKER_VERSION_GROUPS,
  WorkerStatus,
  WorkerVersionCount,
} from '@ql/domain';
import { SqlDatabase } from './sql-executor';
import { WORKER_STATUS_SQL } from './worker-admin-sql';

export class SqlOperationalStatsRepository implements OperationalStatsRepository {
  constructor(private readonly db: SqlDatabase) {}

  async counts(): Promise<OperationalCounts> {
    const sessions: Record<WorkerStatus, number> = {
      online: 0,
      draining: 0,
      expired: 0,
      offline: 0,
      disabled: 0,
    };
    // The admin views' effective status (ADR 0035): one expression, so both always agree.
    const sessionRows = await this.db.many<{
      status: WorkerStatus;
      n: number;
      recovering: number;
      records: number;
      software_version: string;
      protocol_version: number;
    }>(
      `SELECT ${WORKER_STATUS_SQL} AS status, software_version, protocol_version, COUNT(*) AS n,
              SUM(CASE WHEN recovery_required > 0 THEN 1 ELSE 0 END) AS recovering,
              SUM(recovery_required) AS records
         FROM workers GROUP BY 1, 2, 3`,
      { yes: true },
    );
    const recoveryRequired = { workers: 0, records: 0 };
    const live = new Map<string, WorkerVersionCount>();
    for (const row of sessionRows) {
      sessions[row.status] += Number(row.n);
      recoveryRequired.workers += Number(row.recovering);
      recoveryRequired.records += Number(row.records);
      if (row.status !== 'online' && row.status !== 'draining') continue;
      const key = `${row.protocol_version} ${row.software_version}`;
      const workers = (live.get(key)?.workers ?? 0) + Number(row.n);
      live.set(key, {
        softwareVersion: row.software_version,
        protocolVersion: Number(row.protocol_version),
        workers,
      });
    }
    const runs: Record<string, number> = Object.fromEntries(RUN_STATUSES.map((s) => [s, 0]));
    const runRows = await this.db.many<{ status: string; n: number }>(
      'SELECT status, COUNT(*) AS n FROM runs GROUP BY status',
    );
    for (const row of runRows) runs[row.status] = Number(row.n);
    return { sessions, runs, recoveryRequired, versions: topVersions([...live.values()]) };
  }
}

/** The most common groups (ties by version text), the rest summed per protocol under `other`. */
function topVersions(groups: WorkerVersionCount[]): WorkerVersionCount[] {
  groups.sort(
    (a, b) =>
      b.workers - a.workers ||
      a.protocolVersion - b.protocolVersion ||
      (a.softwareVersion < b.softwareVersion ? -1 : a.softwareVersion > b.softwareVersion ? 1 : 0),
  );
  const kept = groups.slice(0, WORKER_VERSION_GROUPS - 2);
  const other = new Map<number, number>();
  for (const g of groups.slice(kept.length))
    other.set(g.protocolVersion, (other.get(g.protocolVersion) ?? 0) + g.workers);
  for (const [protocolVersion, workers] of other)
    kept.push({ softwareVersion: 'other', protocolVersion, workers });
  return kept;
}
