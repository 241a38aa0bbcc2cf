import { SqlDatabase } from './sql-executor';

/** What a running control plane says of itself and of the secret keys it holds (ids and checks only). */
export interface PlaneSecretKeys {
  readonly replicaId: string;
  /** `host pid`, for messages. */
  readonly process: string;
  /** Key id → check value (`SecretCipher.keyChecks`); empty: no `QL_SECRETS_KEY`. */
  readonly keys: Readonly<Record<string, string>>;
  /** How often it refreshes its row; 0: only at its start (its sweeper is off). */
  readonly refreshMs: number;
}

interface Row {
  replica_id: string;
  info: string;
  seen_ms: number | string;
  now_ms: number | string;
}

/**
 * The `plane_secret_keys` rows (issue 29 item 5, ADR 0050): each running control plane upserts its own
 * at start and on a timer and deletes it when it stops; `npm run secret` reads the live ones, by the
 * database's clock, before it writes a value a running plane could not open.
 */
export class SqlPlaneSecretKeyRepository {
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

  /** The planes that refreshed their row within three of their periods (or never refresh it). */
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
