import {
  AuditEntry,
  ConflictError,
  ENV_VAR_LIMITS,
  EnvImportPlan,
  EnvVarChange,
  EnvVarRecord,
  EnvVarRepository,
  IdGenerator,
  NewEnvVar,
  NotFoundError,
  SealedSecret,
  SecretCipher,
  UnavailableError,
  ValidationError,
  envVarSecretName,
  parseEnvVarValue,
  utf8Length,
} from '@ql/domain';
import { appendAudit } from './audit-sql';
import { openSecrets } from './secret-delivery';
import { deleteUnmapped, writeSealed } from './secret-sql';
import { SqlDatabase, SqlExecutor, SqlTransaction, isTrue, toInt, toMs } from './sql-executor';

const COLUMNS = 'id, name, secret, value, remark, enabled, position, version, created_at, updated_at';

interface EnvVarRow {
  id: string;
  name: string;
  secret: number | boolean;
  value: string | null;
  remark: string;
  enabled: number | boolean;
  position: number | string;
  version: number | string;
  created_at: number | Date;
  updated_at: number | Date;
}

/**
 * Global environment variables on either dialect (issue 31 item 2, ADR 0061). Every write holds one
 * lock (`env_vars`), so positions and the enabled limits are judged on a stable set; a secret
 * variable's value is written as the secret `env.<name>` in the same transaction, sealed before any
 * statement. Each write commits with one audit row naming the variable, never a value.
 */
export class SqlEnvVarRepository implements EnvVarRepository {
  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
    private readonly cipher: SecretCipher | undefined,
  ) {}

  private seal(name: string, value: string) {
    if (!this.cipher)
      throw new UnavailableError(
        'secrets_disabled',
        'secret env vars are disabled: set QL_SECRETS_KEY to store them',
      );
    return this.cipher.seal(envVarSecretName(name), value);
  }

  async create(input: NewEnvVar, audit: AuditEntry): Promise<EnvVarRecord> {
    const sealed = input.secret ? this.seal(input.name, input.value) : null;
    return this.write(async (tx) => {
      await this.insert(tx, input, sealed);
      await appendAudit(tx, this.ids, {
        ...audit,
        action: 'env_var.create',
        target: `env_var:${input.name}`,
        detail: { secret: input.secret, enabled: input.enabled },
      });
      return input.name;
    });
  }

  /** A new row (and its secret or first version) at the end of the order; no audit. */
  private async insert(tx: SqlTransaction, input: NewEnvVar, sealed: SealedSecret | null): Promise<void> {
    if (await readRow(tx, input.name))
      throw new ConflictError(
        'env_var_exists',
        `an env var named ${input.name} exists; change it with PATCH`,
      );
    if (sealed) {
      const secretName = envVarSecretName(input.name);
      if (await tx.one('SELECT name FROM secrets WHERE name = :secretName', { secretName }))
        throw new ConflictError(
          'secret_exists',
          `a secret named ${secretName} exists (made before env vars reserved the name); delete it first`,
        );
      await writeSealed(tx, secretName, sealed, false);
    }
    const last = await tx.one<{ position: number | string | null }>(
      'SELECT max(position) AS position FROM env_vars',
    );
    const id = this.ids.uuidV7();
    if (!input.secret) await keepVersion(tx, id, 1, input.value);
    await tx.run(
      `INSERT INTO env_vars (${COLUMNS})
       VALUES (:id, :name, :secret, :value, :remark, :enabled, :position, 1, {now}, {now})`,
      {
        id,
        name: input.name,
        secret: input.secret,
        value: input.secret ? null : input.value,
        remark: input.remark,
        enabled: input.enabled,
        position: last?.position === null || last?.position === undefined ? 1 : toInt(last.position) + 1,
      },
    );
  }

  async update(name: string, change: EnvVarChange, audit: AuditEntry): Promise<EnvVarRecord> {
    const current = await this.find(name);
    if (!current) throw new NotFoundError('env_var');
    // Judged (and sealed) before the transaction; the kind never changes, so it still holds inside.
    const value = change.value === undefined ? undefined : parseEnvVarValue(change.value, current.secret);
    const sealed = value !== undefined && current.secret ? this.seal(name, value) : null;
    return this.write(async (tx) => {
      const row = await readRow(tx, name);
      if (!row) throw new NotFoundError('env_var');
      if (isTrue(row.secret) !== current.secret)
        throw new ConflictError('env_var_changed', `env var ${name} was replaced meanwhile; read it again`);
      await this.change(tx, row, value, sealed, change);
      await appendAudit(tx, this.ids, {
        ...audit,
        action: 'env_var.update',
        target: `env_var:${name}`,
        detail: { fields: Object.keys(change).sort() },
      });
      return name;
    });
  }

  /** A row's new value (sealed when secret), remark and enabled; the version grows with the value. */
  private async change(
    tx: SqlTransaction,
    row: EnvVarRow,
    value: string | undefined,
    sealed: SealedSecret | null,
    change: { readonly remark?: string; readonly enabled?: boolean },
  ): Promise<void> {
    const name = row.name;
    const valueChanged = value !== undefined && (isTrue(row.secret) || value !== row.value);
    if (sealed) await writeSealed(tx, envVarSecretName(name), sealed, true);
    if (valueChanged && !isTrue(row.secret))
      await keepVersion(tx, String(row.id), toInt(row.version) + 1, value!);
    await tx.run(
      `UPDATE env_vars SET value = :value, remark = :remark, enabled = :enabled,
         version = version + :bump, updated_at = {now} WHERE name = :name`,
      {
        name,
        value: isTrue(row.secret) ? null : (value ?? row.value),
        remark: change.remark ?? row.remark,
        enabled: change.enabled ?? isTrue(row.enabled),
        bump: valueChanged ? 1 : 0,
      },
    );
  }

  async import(entries: readonly NewEnvVar[], apply: boolean, audit: AuditEntry): Promise<EnvImportPlan> {
    if (entries.some((e) => e.secret)) this.seal('check', 'check');
    return this.db.transaction(async (tx) => {
      await tx.lock('env_vars');
      const plan: EnvImportPlan = { applied: false, create: [], update: [], unchanged: [], refused: [] };
      const writes: (() => Promise<void>)[] = [];
      for (const entry of entries) {
        const row = await readRow(tx, entry.name);
        const sealed = () => (entry.secret ? this.seal(entry.name, entry.value) : null);
        if (!row) {
          plan.create.push(entry.name);
          writes.push(() => this.insert(tx, entry, sealed()));
          continue;
        }
        if (isTrue(row.secret) !== entry.secret) {
          plan.refused.push({
            at: entry.name,
            reason: `env var ${entry.name} exists as ${isTrue(row.secret) ? 'secret' : 'plain'}: delete it first to import it otherwise`,
          });
          continue;
        }
        const current = entry.secret
          ? (await openSecrets(tx, this.cipher, [envVarSecretName(entry.name)])).get(
              envVarSecretName(entry.name),
            )
          : row.value;
        const same = current === entry.value;
        if (same && row.remark === entry.remark && isTrue(row.enabled) === entry.enabled) {
          plan.unchanged.push(entry.name);
          continue;
        }
        plan.update.push(entry.name);
        const value = same ? undefined : entry.value;
        writes.push(() =>
          this.change(tx, row, value, value === undefined ? null : sealed(), {
            remark: entry.remark,
            enabled: entry.enabled,
          }),
        );
      }
      if (!apply) return plan;
      if (writes.length === 0) return { ...plan, applied: true };
      for (const write of writes) await write();
      await checkLimits(tx);
      await appendAudit(tx, this.ids, {
        ...audit,
        action: 'env_var.import',
        target: 'env_vars',
        detail: { create: plan.create, update: plan.update },
      });
      return { ...plan, applied: true };
    });
  }

  async delete(name: string, audit: AuditEntry): Promise<EnvVarRecord> {
    return this.db.transaction(async (tx) => {
      await tx.lock('env_vars');
      const row = await readRow(tx, name);
      if (!row) throw new NotFoundError('env_var');
      await tx.run('DELETE FROM env_vars WHERE name = :name', { name });
      if (isTrue(row.secret)) await deleteUnmapped(tx, envVarSecretName(name));
      await appendAudit(tx, this.ids, { ...audit, action: 'env_var.delete', target: `env_var:${name}` });
      return toRecord(row);
    });
  }

  async reorder(names: readonly string[], audit: AuditEntry): Promise<EnvVarRecord[]> {
    return this.db.transaction(async (tx) => {
      await tx.lock('env_vars');
      const rows = await tx.many<{ name: string }>('SELECT name FROM env_vars ORDER BY position, name');
      const known = new Set(rows.map((r) => r.name));
      const unknown = names.find((n) => !known.has(n));
      if (unknown !== undefined) throw new ConflictError('order_mismatch', `no env var is named ${unknown}`);
      const given = new Set(names);
      const missing = rows.find((r) => !given.has(r.name));
      if (missing !== undefined)
        throw new ConflictError('order_mismatch', `the order leaves out env var ${missing.name}`);
      for (const [i, name] of names.entries())
        await tx.run('UPDATE env_vars SET position = :position WHERE name = :name', {
          name,
          position: i + 1,
        });
      await appendAudit(tx, this.ids, {
        ...audit,
        action: 'env_var.reorder',
        target: 'env_vars',
        detail: { names: [...names] },
      });
      return (await tx.many<EnvVarRow>(`SELECT ${COLUMNS} FROM env_vars ORDER BY position, name`)).map(
        toRecord,
      );
    });
  }

  async find(name: string): Promise<EnvVarRecord | null> {
    const row = await readRow(this.db, name);
    return row ? toRecord(row) : null;
  }

  async list(query: { after?: string; limit: number }): Promise<EnvVarRecord[]> {
    if (query.after === undefined)
      return (
        await this.db.many<EnvVarRow>(
          `SELECT ${COLUMNS} FROM env_vars ORDER BY position, name LIMIT :limit`,
          {
            limit: query.limit,
          },
        )
      ).map(toRecord);
    const after = await readRow(this.db, query.after);
    if (!after) throw new ValidationError('after', 'unknown_env_var');
    const rows = await this.db.many<EnvVarRow>(
      `SELECT ${COLUMNS} FROM env_vars
       WHERE position > :position OR (position = :position AND name > :name)
       ORDER BY position, name LIMIT :limit`,
      { position: toInt(after.position), name: after.name, limit: query.limit },
    );
    return rows.map(toRecord);
  }

  /** One write under the `env_vars` lock; the limits are judged on what it leaves, before it commits. */
  private async write(fn: (tx: SqlTransaction) => Promise<string>): Promise<EnvVarRecord> {
    return this.db.transaction(async (tx) => {
      await tx.lock('env_vars');
      const name = await fn(tx);
      await checkLimits(tx);
      return toRecord((await readRow(tx, name))!);
    });
  }
}

/** What every run's spec will hold must fit in it (ADR 0061): refused with the limit it passes. */
async function checkLimits(tx: SqlExecutor): Promise<void> {
  const total = await tx.one<{ n: number | string }>('SELECT count(*) AS n FROM env_vars');
  if (toInt(total!.n) > ENV_VAR_LIMITS.total)
    throw new ConflictError('env_vars_limit', `at most ${ENV_VAR_LIMITS.total} env vars exist`);
  const enabled = await tx.many<{ name: string; secret: number | boolean; value: string | null }>(
    'SELECT name, secret, value FROM env_vars WHERE enabled',
  );
  const secret = enabled.filter((r) => isTrue(r.secret));
  const plain = enabled.filter((r) => !isTrue(r.secret));
  if (secret.length > ENV_VAR_LIMITS.enabledSecret)
    throw new ConflictError(
      'env_vars_limit',
      `at most ${ENV_VAR_LIMITS.enabledSecret} secret env vars are enabled at once`,
    );
  if (plain.length > ENV_VAR_LIMITS.enabledPlain)
    throw new ConflictError(
      'env_vars_limit',
      `at most ${ENV_VAR_LIMITS.enabledPlain} plain env vars are enabled at once`,
    );
  const bytes = plain.reduce((n, r) => n + utf8Length(r.name) + utf8Length(r.value ?? ''), 0);
  if (bytes > ENV_VAR_LIMITS.enabledPlainBytes)
    throw new ConflictError(
      'env_vars_limit',
      `the enabled plain env vars would total ${bytes} bytes; at most ${ENV_VAR_LIMITS.enabledPlainBytes}`,
    );
}

async function keepVersion(tx: SqlExecutor, id: string, version: number, value: string): Promise<void> {
  await tx.run('INSERT INTO env_var_versions (env_var_id, version, value) VALUES (:id, :version, :value)', {
    id,
    version,
    value,
  });
}

async function readRow(on: SqlExecutor, name: string): Promise<EnvVarRow | undefined> {
  return on.one<EnvVarRow>(`SELECT ${COLUMNS} FROM env_vars WHERE name = :name`, { name });
}

function toRecord(row: EnvVarRow): EnvVarRecord {
  const secret = isTrue(row.secret);
  return {
    id: String(row.id),
    name: row.name,
    secret,
    value: secret ? null : row.value,
    remark: row.remark,
    enabled: isTrue(row.enabled),
    position: toInt(row.position),
    version: toInt(row.version),
    createdAt: toMs(row.created_at),
    updatedAt: toMs(row.updated_at),
  };
}
