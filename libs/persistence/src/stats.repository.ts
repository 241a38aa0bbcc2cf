import { OperationalCounts, OperationalStatsRepository, RUN_STATUSES } from '@ql/domain';
import { SqlDatabase } from './sql-executor';

export class SqlOperationalStatsRepository implements OperationalStatsRepository {
  constructor(private readonly db: SqlDatabase) {}

  async counts(): Promise<OperationalCounts> {
    const sessions = { online: 0, draining: 0, offline: 0, expired: 0 };
    const sessionRows = await this.db.many<{
      status: keyof typeof sessions;
      expired: number;
      n: number;
      recovering: number;
      records: number;
    }>(
      `SELECT status, CASE WHEN status <> 'offline' AND lease_expires_at <= {now} THEN 1 ELSE 0 END AS expired,
              COUNT(*) AS n, SUM(CASE WHEN recovery_required > 0 THEN 1 ELSE 0 END) AS recovering,
              SUM(recovery_required) AS records
         FROM workers GROUP BY 1, 2`,
    );
    const recoveryRequired = { workers: 0, records: 0 };
    for (const row of sessionRows) {
      sessions[Number(row.expired) ? 'expired' : row.status] += Number(row.n);
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
