import {
  AuditEntry,
  ConflictError,
  IdGenerator,
  LeaseFenceCommand,
  NotFoundError,
  SecretDelivery,
  SecretRecord,
  SecretRepository,
  SecretPutMode,
  SecretRotation,
  UnavailableError,
} from '@ql/domain';
import { appendAudit } from './audit-sql';
import { ENV_VAR_SECRET_PREFIX, SecretCipher } from '@ql/domain';
import { SecretRow, deliverSecrets, redactionValuesFor, sealedOf } from './secret-delivery';
import type { RedactionSource } from './run-log-redaction';
import { deleteUnmapped, usersOf, writeSealed } from './secret-sql';
import { SqlDatabase, SqlExecutor, toMs } from './sql-executor';

const META = 'name, key_id, created_at, updated_at';

/**
 * Secrets on either dialect (ADR 0050): sealed by the cipher before any statement, opened only for a
 * delivery or a redaction; what admins get is metadata. A put, delete or rotation and its audit row
 * (never a value) commit together.
 */
export class SqlSecretRepository implements SecretRepository {
  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
    private readonly cipher: SecretCipher | undefined,
  ) {}

  private sealer(): SecretCipher {
    if (!this.cipher)
      throw new UnavailableError(
        'secrets_disabled',
        'secrets are disabled: set QL_SECRETS_KEY to store them',
      );
    return this.cipher;
  }

  /** `create` refuses an existing name (conflict `secret_exists`), `replace` a missing one (not found). */
  async put(name: string, value: string, audit: AuditEntry, mode: SecretPutMode = 'upsert') {
    const sealed = this.sealer().seal(name, value);
    return this.db.transaction(async (tx) => {
      const existing = await tx.one<{ name: string }>(
        'SELECT name FROM secrets WHERE name = :name {forUpdate}',
        {
          name,
        },
      );
      if (existing && mode === 'create')
        throw new ConflictError('secret_exists', `a secret named ${name} exists; replace it with PUT`);
      if (!existing && mode === 'replace') throw new NotFoundError('secret');
      await writeSealed(tx, name, sealed, !!existing);
      await appendAudit(tx, this.ids, {
        ...audit,
        action: existing ? 'secret.replace' : 'secret.create',
        target: `secret:${name}`,
      });
      return { record: (await readRecord(tx, name))!, created: !existing };
    });
  }

  async delete(name: string, audit: AuditEntry): Promise<SecretRecord> {
    return this.db.transaction(async (tx) => {
      const record = await readRecord(tx, name);
      if (!record) throw new NotFoundError('secret');
      if (name.startsWith(ENV_VAR_SECRET_PREFIX)) {
        const owner = name.slice(ENV_VAR_SECRET_PREFIX.length);
        const owned = await tx.one('SELECT id FROM env_vars WHERE name = :owner AND secret', { owner });
        if (owned)
          throw new ConflictError(
            'env_var_secret',
            `secret ${name} holds the value of env var ${owner}: delete it with DELETE /api/v1/env-vars/${owner}`,
          );
      }
      await deleteUnmapped(tx, name);
      await appendAudit(tx, this.ids, { ...audit, action: 'secret.delete', target: `secret:${name}` });
      return record;
    });
  }

  async find(name: string): Promise<SecretRecord | null> {
    return readRecord(this.db, name);
  }

  async list(query: { after?: string; limit: number }): Promise<SecretRecord[]> {
    const rows = await this.db.many<SecretRow>(
      `SELECT ${META} FROM secrets ${query.after !== undefined ? 'WHERE name > :after' : ''}
       ORDER BY name LIMIT :limit`,
      { limit: query.limit, ...(query.after !== undefined ? { after: query.after } : {}) },
    );
    return Promise.all(rows.map(async (row) => toRecord(row, await usersOf(this.db, row.name))));
  }

  async rotate(audit: AuditEntry): Promise<SecretRotation> {
    const cipher = this.sealer();
    return this.db.transaction(async (tx) => {
      const rows = await tx.many<SecretRow>(
        `SELECT name, key_id, nonce, ciphertext, created_at, updated_at FROM secrets ORDER BY name {forUpdate}`,
      );
      let reencrypted = 0;
      for (const row of rows) {
        if (row.key_id === cipher.currentKeyId) continue;
        const sealed = cipher.seal(row.name, cipher.open(row.name, sealedOf(row)));
        await tx.run(
          'UPDATE secrets SET key_id = :keyId, nonce = :nonce, ciphertext = :ciphertext WHERE name = :name',
          {
            name: row.name,
            ...sealed,
          },
        );
        reencrypted++;
      }
      await appendAudit(tx, this.ids, {
        ...audit,
        action: 'secret.rotate',
        target: `secret_key:${cipher.currentKeyId}`,
        detail: { reencrypted },
      });
      return { reencrypted, current: rows.length - reencrypted };
    });
  }

  /**
   * At start (ADR 0050): one value under each stored key id is opened, so a key that is missing or
   * wrong stops the start with a SecretKeyError naming the id, before any run needs it. Secrets
   * stored and no key at all is the same error.
   */
  async checkKeys(): Promise<{ keyIds: string[] }> {
    const rows = await this.db.many<SecretRow>(
      `SELECT s.name, s.key_id, s.nonce, s.ciphertext, s.created_at, s.updated_at FROM secrets s
       WHERE s.name = (SELECT min(o.name) FROM secrets o WHERE o.key_id = s.key_id) ORDER BY s.key_id`,
    );
    for (const row of rows) {
      if (!this.cipher)
        throw new UnavailableError(
          'secrets_key_missing',
          `secrets are stored (under key id ${row.key_id}) but QL_SECRETS_KEY is not set`,
        );
      this.cipher.open(row.name, sealedOf(row));
    }
    return { keyIds: rows.map((r) => r.key_id) };
  }

  /** The values a live lease's attempt maps, for its holder (ADR 0050); see `deliverSecrets`. */
  deliver(command: LeaseFenceCommand): Promise<SecretDelivery> {
    return deliverSecrets(this.db, this.ids, this.cipher, command);
  }

  /** What the log store redacts from a run's output, and the key its held state is sealed with. */
  get redaction(): RedactionSource {
    return { values: (tx, run) => redactionValuesFor(tx, this.cipher, run), cipher: this.cipher };
  }
}

async function readRecord(on: SqlExecutor, name: string): Promise<SecretRecord | null> {
  const row = await on.one<SecretRow>(`SELECT ${META} FROM secrets WHERE name = :name`, { name });
  return row ? toRecord(row, await usersOf(on, name)) : null;
}

function toRecord(row: SecretRow, usedBy: string[]): SecretRecord {
  return {
    name: row.name,
    keyId: row.key_id,
    createdAt: toMs(row.created_at),
    updatedAt: toMs(row.updated_at),
    usedBy,
  };
}
