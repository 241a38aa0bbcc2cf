import {
  ApiKeyRecord,
  ApiKeyRole,
  AuditEntry,
  ConsoleSessionRecord,
  ConsoleSessionRepository,
  IdGenerator,
  NotFoundError,
} from '@ql/domain';
import { appendAudit } from './audit-sql';
import { SqlDatabase, toInt, toMs, toMsOrNull } from './sql-executor';

interface SessionRow {
  id: string;
  api_key_id: string;
  created_at: number | Date;
  last_seen_at: number | Date;
  idle_ms: number | string;
  expires_at: number | Date;
  revoked_at: number | Date | null;
  now: number | Date;
}
interface LiveRow extends SessionRow {
  key_name: string;
  key_role: ApiKeyRole;
  key_created_at: number | Date;
}

const COLUMNS = 's.id, s.api_key_id, s.created_at, s.last_seen_at, s.idle_ms, s.expires_at, s.revoked_at';

/** Console sessions by SHA-256 digest of their token (ADR 0052); the token itself is never stored. */
export class SqlConsoleSessionRepository implements ConsoleSessionRepository {
  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
  ) {}

  async create(
    input: { id: string; digest: string; apiKeyId: string; idleMs: number; maxMs: number },
    audit: AuditEntry,
  ): Promise<ConsoleSessionRecord> {
    return this.db.transaction(async (tx) => {
      const inserted = await tx.run(
        `INSERT INTO console_sessions (id, digest, api_key_id, created_at, last_seen_at, idle_ms, expires_at)
         SELECT :id, :digest, k.id, {now}, {now}, :idleMs, {now + :maxMs}
         FROM api_keys k WHERE k.id = :apiKeyId AND k.revoked_at IS NULL`,
        input,
      );
      if (inserted === 0) throw new NotFoundError('api_key');
      await appendAudit(tx, this.ids, audit);
      return toRecord(
        (await tx.one<SessionRow>(
          `SELECT ${COLUMNS}, {now} AS now FROM console_sessions s WHERE s.id = :id`,
          {
            id: input.id,
          },
        ))!,
      );
    });
  }

  async findLive(
    digest: string,
    touchEveryMs: number,
  ): Promise<{ session: ConsoleSessionRecord; key: ApiKeyRecord } | null> {
    const row = await this.db.one<LiveRow>(
      `SELECT ${COLUMNS}, {now} AS now, k.name AS key_name, k.role AS key_role, k.created_at AS key_created_at
       FROM console_sessions s JOIN api_keys k ON k.id = s.api_key_id
       WHERE s.digest = :digest AND s.revoked_at IS NULL AND k.revoked_at IS NULL`,
      { digest },
    );
    if (!row || !isLive(row)) return null;
    let session = toRecord(row);
    const now = toMs(row.now);
    if (now - session.lastSeenAt >= touchEveryMs) {
      // Only moves forward: a slower concurrent request never moves it back.
      await this.db.run(
        'UPDATE console_sessions SET last_seen_at = {now} WHERE id = :id AND last_seen_at < {now}',
        { id: session.id },
      );
      session = { ...session, lastSeenAt: now };
    }
    const key: ApiKeyRecord = {
      id: row.api_key_id,
      name: row.key_name,
      role: row.key_role,
      createdAt: toMs(row.key_created_at),
      revokedAt: null,
    };
    return { session, key };
  }

  async revoke(id: string, audit: AuditEntry): Promise<ConsoleSessionRecord> {
    return this.db.transaction(async (tx) => {
      const changed = await tx.run(
        'UPDATE console_sessions SET revoked_at = COALESCE(revoked_at, {now}) WHERE id = :id',
        { id },
      );
      if (changed === 0) throw new NotFoundError('console_session');
      await appendAudit(tx, this.ids, audit);
      return toRecord(
        (await tx.one<SessionRow>(
          `SELECT ${COLUMNS}, {now} AS now FROM console_sessions s WHERE s.id = :id`,
          {
            id,
          },
        ))!,
      );
    });
  }

  async list(after: string | null, limit: number): Promise<(ConsoleSessionRecord & { live: boolean })[]> {
    const rows = await this.db.many<SessionRow & { key_revoked_at: number | Date | null }>(
      `SELECT ${COLUMNS}, {now} AS now, k.revoked_at AS key_revoked_at
       FROM console_sessions s LEFT JOIN api_keys k ON k.id = s.api_key_id
       ${after ? 'WHERE s.id > :after' : ''} ORDER BY s.id LIMIT :limit`,
      { limit, ...(after ? { after } : {}) },
    );
    return rows.map((row) => ({
      ...toRecord(row),
      live: row.revoked_at === null && row.key_revoked_at === null && isLive(row),
    }));
  }
}

/** Neither idle past its limit nor past its lifetime, by the database clock read with the row. */
function isLive(row: SessionRow): boolean {
  const now = toMs(row.now);
  return now < toMs(row.expires_at) && now - toMs(row.last_seen_at) < toInt(row.idle_ms);
}

function toRecord(row: SessionRow): ConsoleSessionRecord {
  return {
    id: row.id,
    apiKeyId: row.api_key_id,
    createdAt: toMs(row.created_at),
    lastSeenAt: toMs(row.last_seen_at),
    idleMs: toInt(row.idle_ms),
    expiresAt: toMs(row.expires_at),
    revokedAt: toMsOrNull(row.revoked_at),
  };
}
