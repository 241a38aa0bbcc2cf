import {
  ApiKeyRecord,
  ApiKeyRepository,
  ApiKeyRole,
  AuditEntry,
  IdGenerator,
  NotFoundError,
} from '@ql/domain';
import { appendAudit } from './audit-sql';
import { SqlDatabase, toMs } from './sql-executor';

interface ApiKeyRow {
  id: string;
  name: string;
  role: ApiKeyRole;
  created_at: number | Date;
  revoked_at: number | Date | null;
}
const COLUMNS = 'id, name, role, created_at, revoked_at';

/** API keys by SHA-256 digest; the key itself is never stored (R-ID-5). */
export class SqlApiKeyRepository implements ApiKeyRepository {
  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
  ) {}

  async create(key: { id: string; name: string; role: ApiKeyRole; digest: string }, audit: AuditEntry) {
    return this.db.transaction(async (tx) => {
      const row = await tx.one<ApiKeyRow>(
        `INSERT INTO api_keys (id, name, role, digest, created_at) VALUES (:id, :name, :role, :digest, {now})
         RETURNING ${COLUMNS}`,
        key,
      );
      await appendAudit(tx, this.ids, audit);
      return toRecord(row!);
    });
  }

  async findActiveByDigest(digest: string): Promise<ApiKeyRecord | null> {
    const row = await this.db.one<ApiKeyRow>(
      `SELECT ${COLUMNS} FROM api_keys WHERE digest = :digest AND revoked_at IS NULL`,
      { digest },
    );
    return row ? toRecord(row) : null;
  }

  async list(): Promise<ApiKeyRecord[]> {
    return (await this.db.many<ApiKeyRow>(`SELECT ${COLUMNS} FROM api_keys ORDER BY created_at, id`)).map(
      toRecord,
    );
  }

  async revoke(id: string, audit: AuditEntry): Promise<ApiKeyRecord> {
    return this.db.transaction(async (tx) => {
      const row = await tx.one<ApiKeyRow>(
        `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, {now}) WHERE id = :id RETURNING ${COLUMNS}`,
        { id },
      );
      if (!row) throw new NotFoundError('api_key');
      await appendAudit(tx, this.ids, audit);
      return toRecord(row);
    });
  }
}

function toRecord(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    role: row.role,
    createdAt: toMs(row.created_at),
    revokedAt: row.revoked_at === null ? null : toMs(row.revoked_at),
  };
}
