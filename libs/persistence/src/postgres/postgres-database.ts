import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { Clock } from '@ql/domain';
import { POSTGRES_MIGRATIONS } from '../../../../migrations';
import {
  CompiledSql,
  SqlDatabase,
  SqlParams,
  SqlTransaction,
  StatementCounter,
  bindNames,
  compilePostgres,
} from '../sql-executor';
import { asUnavailable } from './connection-errors';
import { loadPg } from './load-pg';
import { PoolGate } from './pool-gate';
import { PostgresQueueListener } from './postgres-signals';

export interface PostgresOptions {
  readonly url: string;
  readonly poolSize?: number;
  readonly applicationName?: string;
  /** How long making a new connection may take before the request is 503 `database_unreachable` (default 10 s). */
  readonly connectTimeoutMs?: number;
  /**
   * How long a request waits for a pooled connection while all are in use before it is 503
   * `database_busy` (default 30 s, ADR 0039); apart from the connect timeout.
   */
  readonly poolWaitMs?: number;
  /** Tests only: read time from this clock instead of the database (a model with a controllable clock). */
  readonly clock?: Clock;
}

/** Serialises concurrent migrators (several replicas starting at once). */
const MIGRATION_LOCK_KEY = 0x716c6d67;
const RETRYABLE = new Set(['40001', '40P01']); // serialization_failure, deadlock_detected
const MAX_TX_ATTEMPTS = 5;
/** ADR 0039: a burst waits this long for a pooled connection; making one is bounded by connectTimeoutMs. */
const DEFAULT_POOL_WAIT_MS = 30_000;

/** A deadlock or serialization failure: the server rolled the work back, and it may be tried again. */
export function isRetryable(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code !== undefined && RETRYABLE.has(code);
}

interface Compiled extends CompiledSql {
  readonly name: string;
}

/** PostgreSQL through `pg`: a pool, named prepared statements, and database time inside the SQL. */
export class PostgresDatabase implements SqlDatabase {
  readonly dialect = 'postgres' as const;
  readonly statements = new StatementCounter();
  private readonly cache = new Map<string, Compiled>();
  private migrated = false;

  private constructor(
    readonly pool: Pool,
    private readonly gate: PoolGate,
    private readonly url: string,
    private readonly clock?: Clock,
  ) {}

  /** This replica's queue signals: one dedicated `LISTEN` connection, opened now (ADR 0019). */
  signals(): PostgresQueueListener {
    return new PostgresQueueListener(this.url).start();
  }

  static async open(options: PostgresOptions, migrate = true): Promise<PostgresDatabase> {
    if (migrate) await migratePostgres(options.url);
    const size = options.poolSize ?? 10;
    const pool = new (loadPg().Pool)({
      connectionString: options.url,
      max: size,
      application_name: options.applicationName ?? 'ql-control-plane',
      // Bounded: an unreachable server that drops packets must answer 503, not hang the request.
      // Only making a connection: the PoolGate holds requests back while every connection is busy.
      connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    });
    // A dropped idle connection must not crash the process; the next checkout reconnects.
    pool.on('error', () => undefined);
    const gate = new PoolGate(size, options.poolWaitMs ?? DEFAULT_POOL_WAIT_MS);
    return new PostgresDatabase(pool, gate, options.url, options.clock);
  }

  async one<T>(sql: string, params?: SqlParams): Promise<T | undefined> {
    return (await this.pooled((client) => this.query<T>(client, sql, params))).rows[0];
  }
  async many<T>(sql: string, params?: SqlParams): Promise<T[]> {
    return (await this.pooled((client) => this.query<T>(client, sql, params))).rows;
  }
  async run(sql: string, params?: SqlParams): Promise<number> {
    return (await this.pooled((client) => this.query(client, sql, params))).rowCount ?? 0;
  }

  /** One statement on a pooled connection, as `pool.query` does, after the PoolGate's wait. */
  private async pooled<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    const release = await this.gate.acquire();
    try {
      const client = await this.pool.connect().catch((error: unknown) => {
        throw asUnavailable(error);
      });
      let failure: Error | undefined;
      const lost = (error: Error) => (failure = error);
      client.on('error', lost);
      try {
        return await fn(client);
      } catch (error) {
        failure = error instanceof Error ? error : new Error(String(error));
        throw error;
      } finally {
        client.off('error', lost);
        // Like pool.query: a connection whose statement failed is not reused.
        client.release(failure);
      }
    } finally {
      release();
    }
  }

  /** BEGIN … COMMIT on one connection; retried (bounded) on serialization failure or deadlock. */
  async transaction<T>(fn: (tx: SqlTransaction) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const permit = await this.gate.acquire();
      const client = await this.pool.connect().catch((error: unknown) => {
        permit();
        throw asUnavailable(error);
      });
      let broken = false;
      // pg emits a connection lost while checked out as 'error' on the client; unheard, it kills the process.
      const lost = () => (broken = true);
      client.on('error', lost);
      try {
        await client.query('BEGIN');
        this.statements.add();
        const result = await fn(this.transactionOn(client));
        await client.query('COMMIT');
        this.statements.add();
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => (broken = true));
        if (!isRetryable(error) || attempt >= MAX_TX_ATTEMPTS) throw asUnavailable(error);
      } finally {
        client.off('error', lost);
        client.release(broken);
        permit();
      }
    }
  }

  async ping(): Promise<void> {
    await this.one('SELECT 1 AS ok');
  }

  async migrationsApplied(): Promise<boolean> {
    if (this.migrated) return true;
    const row = await this.one<{ n: string }>(
      `SELECT count(*) AS n FROM information_schema.tables t WHERE t.table_name = 'schema_migrations'`,
    );
    if (Number(row?.n) === 0) return false;
    const applied = await this.one<{ n: string }>('SELECT count(*) AS n FROM schema_migrations');
    this.migrated = Number(applied?.n) >= POSTGRES_MIGRATIONS.length;
    return this.migrated;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  private transactionOn(client: PoolClient): SqlTransaction {
    return {
      one: async <T>(sql: string, params?: SqlParams) => (await this.query<T>(client, sql, params)).rows[0],
      many: async <T>(sql: string, params?: SqlParams) => (await this.query<T>(client, sql, params)).rows,
      run: async (sql, params) => (await this.query(client, sql, params)).rowCount ?? 0,
      lock: async (key) => {
        await this.query(client, 'SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))', { key });
      },
    };
  }

  private async query<T>(on: Pool | PoolClient, sql: string, params: SqlParams | undefined) {
    let compiled = this.cache.get(sql);
    if (!compiled) {
      const c = compilePostgres(sql, this.clock !== undefined);
      // Named prepared statements: parsed once per connection, like `pgbench -M prepared`.
      compiled = { ...c, name: `ql_${createHash('sha1').update(c.text).digest('hex').slice(0, 16)}` };
      this.cache.set(sql, compiled);
    }
    this.statements.add();
    try {
      return await on.query<T & object>({
        name: compiled.name,
        text: compiled.text,
        values: bindNames(compiled, params, this.clock ? { now: this.clock.now() } : undefined),
      });
    } catch (error) {
      throw asUnavailable(error);
    }
  }
}

/** Applies pending migrations through TypeORM under a session advisory lock. */
export async function migratePostgres(url: string): Promise<void> {
  const lock = new (loadPg().Pool)({ connectionString: url, max: 1 });
  const client = await lock.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    const dataSource = new DataSource({
      type: 'postgres',
      url,
      migrations: POSTGRES_MIGRATIONS,
      migrationsTableName: 'schema_migrations',
    });
    await dataSource.initialize();
    try {
      await dataSource.runMigrations({ transaction: 'all' });
    } finally {
      await dataSource.destroy();
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
    client.release();
    await lock.end();
  }
}
