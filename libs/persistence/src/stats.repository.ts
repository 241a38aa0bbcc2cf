import { OperationalCounts, OperationalStatsRepository, RUN_STATUSES, WorkerStatus } from '@ql/domain';
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
    }>(
      `SELECT ${WORKER_STATUS_SQL} AS status, COUNT(*) AS n,
              SUM(CASE WHEN recovery_required > 0 THEN 1 ELSE 0 END) AS recovering,
              SUM(recovery_required) AS records
         FROM workers GROUP BY 1`,
      { yes: true },
    );
    const recoveryRequired = { workers: 0, records: 0 };
    for (const row of sessionRows) {
      sessions[row.status] += Number(row.n);
      recoveryRequired.workers += Number(row.recovering);
      recoveryRequired.records += Number(row.records);
    }
    const runs: Record<string, number> = Object.fromEntries(RUN_STATUSES.map((s) => [s, 0]));
    const runRows = await this.db.many<{ status: string; n: number }>(
      'SELECT status, COUNT(*) AS n FROM runs GROUP BY status',
    );
    for (const row of runRows) runs[row.status] = Number(row.n);
    return { sessions, runs, recoveryRequired };
  }
}
