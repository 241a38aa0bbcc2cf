import { PlaneSecretKeyRepository, PlaneSecretKeys } from '@ql/domain';
import { SqlDatabase } from './sql-executor';

interface Row {
  replica_id: string;
  info: string;
  seen_ms: number | string;
  now_ms: number | string;
}

/** The `plane_secret_keys` rows on either dialect (the port's contract: `PlaneSecretKeyRepository`). */
export class SqlPlaneSecretKeyRepository implements PlaneSecretKeyRepository {
  constructor(private readonly db: SqlDatabase) {}

  async publish(plane: PlaneSecretKeys): Promise<void> {
    const { replicaId, ...info } = plane;
    await this.db.run(
      `INSERT INTO plane_secret_keys (replica_id, info, seen_ms) VALUES (:replicaId, :info, {nowMs})
       ON CONFLICT (replica_id) DO UPDATE SET info = excluded.info, seen_ms = excluded.seen_ms`,
      { replicaId, info: JSON.stringify(info) },
    );
  }

  async withdraw(replicaId: string): Promise<void> {
    await this.db.run('DELETE FROM plane_secret_keys WHERE replica_id = :replicaId', { replicaId });
  }

  async live(): Promise<(PlaneSecretKeys & { readonly seenMsAgo: number })[]> {
    const rows = await this.db.many<Row>(
      'SELECT replica_id, info, seen_ms, {nowMs} AS now_ms FROM plane_secret_keys ORDER BY replica_id',
    );
    return rows.flatMap((row) => {
      const info = JSON.parse(row.info) as Omit<PlaneSecretKeys, 'replicaId'>;
      const seenMsAgo = Number(row.now_ms) - Number(row.seen_ms);
      const live = info.refreshMs === 0 || seenMsAgo <= 3 * info.refreshMs;
      return live ? [{ replicaId: row.replica_id, ...info, seenMsAgo }] : [];
    });
  }
}
