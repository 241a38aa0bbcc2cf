import type BetterSqlite3 from 'better-sqlite3';
import { DataSource } from 'typeorm';
import { Clock, UnavailableError } from '@ql/domain';
import { SQLITE_MIGRATIONS } from '../../../../migrations';
import {
  CompiledSql,
  SqlDatabase,
  SqlParams,
  SqlTransaction,
  StatementCounter,
  compileSqlite,
} from '../sql-executor';
import { QueueSignalHub, QueueSignals, parseQueueSignal } from '../queue-signals';

export interface SqliteOptions {
  readonly path: string;
  /** Attempts for a statement that meets SQLITE_BUSY (another process holds the write lock). */
  readonly busyRetries?: number;
  /** How long SQLite itself waits for the lock on each attempt; short, because it blocks the loop. */
  readonly busyTimeoutMs?: number;
  /**
   * The bound of the connection's page cache, KiB (`PRAGMA cache_size = -<KiB>`); undefined: the
   * driver's compiled default (better-sqlite3: 16,000 KiB).
   */
  readonly cacheKiB?: number;
}

/** The memory- and WAL-related pragmas in force on the connection (the soak bench records them). */
export interface SqlitePragmas {
  readonly pageSize: number;
  /** `PRAGMA cache_size` as SQLite answers it: pages when positive, −KiB when negative. */
  readonly cacheSize: number;
  /** The same as a bound in KiB. */
  readonly cacheKiB: number;
  readonly mmapSize: number;
  readonly walAutocheckpoint: number;
  readonly journalMode: string;
}

interface Prepared {
  readonly compiled: CompiledSql;
  readonly statement: BetterSqlite3.Statement;
}

/**
 * One SQLite file through TypeORM's better-sqlite3 driver. better-sqlite3 is synchronous, so one
 * connection serves the process: an in-process queue keeps an async transaction from interleaving
 * with any other statement, and BEGIN IMMEDIATE with a bounded SQLITE_BUSY retry orders writers
 * across processes.
 */
export class SqliteDatabase implements SqlDatabase {
  readonly dialect = 'sqlite' as const;
  readonly statements = new StatementCounter();
  private readonly cache = new Map<string, Prepared>();
  private queue: Promise<void> = Promise.resolve();
  private busy = false;
  private migrated = false;
  /** Queue signals the temp triggers raised inside the statement or transaction running now. */
  private pendingSignals: string[] = [];
  private readonly hub = new QueueSignalHub();

  private constructor(
    private readonly dataSource: DataSource,
    readonly native: BetterSqlite3.Database,
    private readonly clock: Clock,
    private readonly busyRetries: number,
  ) {}

  static async open(options: SqliteOptions, clock: Clock, migrate = true): Promise<SqliteDatabase> {
    const dataSource = new DataSource({
      type: 'better-sqlite3',
      database: options.path,
      enableWAL: true,
      timeout: options.busyTimeoutMs ?? 25,
      migrations: SQLITE_MIGRATIONS,
      migrationsTableName: 'schema_migrations',
      prepareDatabase: (db: BetterSqlite3.Database) => {
        // WAL + NORMAL: a commit survives a process crash; only an OS crash may lose the last ones.
        db.pragma('synchronous = NORMAL');
        if (options.cacheKiB !== undefined) db.pragma(`cache_size = -${Math.floor(options.cacheKiB)}`);
      },
    });
    await dataSource.initialize();
    const native = (dataSource.driver as unknown as { databaseConnection: BetterSqlite3.Database })
      .databaseConnection;
    const db = new SqliteDatabase(dataSource, native, clock, options.busyRetries ?? 40);
    if (migrate) await db.withBusyRetry(() => dataSource.runMigrations({ transaction: 'all' }));
    db.installSignals();
    return db;
  }

  /**
   * The in-process queue signals (ADR 0019): TEMP triggers on this connection call `ql_signal`, which
   * only records the payload; it reaches the subscribers after the COMMIT (a rollback drops it). This
   * process is the only writer of a standalone database, so every path that queues a run is seen.
   */
  signals(): QueueSignals {
    return {
      subscribe: (listener) => this.hub.subscribe(listener),
      whenListening: async () => undefined,
      close: async () => this.hub.clear(),
    };
  }

  private installSignals(): void {
    const tables = this.native
      .prepare(`SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name IN ('runs', 'workers')`)
      .get() as { n: number };
    if (tables.n < 2) return; // not migrated (a CLI): nobody waits on this connection
    this.native.function('ql_signal', { deterministic: false }, (payload: unknown) => {
      this.pendingSignals.push(String(payload));
      return null;
    });
    this.native.exec(`
      CREATE TEMP TRIGGER IF NOT EXISTS ql_runs_queued_insert AFTER INSERT ON main.runs
        WHEN NEW.status = 'queued' BEGIN SELECT ql_signal('r:' || NEW.id); END;
      CREATE TEMP TRIGGER IF NOT EXISTS ql_runs_queued_update AFTER UPDATE OF status ON main.runs
        WHEN NEW.status = 'queued' AND OLD.status <> 'queued' BEGIN SELECT ql_signal('r:' || NEW.id); END;
      CREATE TEMP TRIGGER IF NOT EXISTS ql_workers_session_changed AFTER UPDATE OF status, session_id, disabled
        ON main.workers
        WHEN OLD.status IS NOT NEW.status OR OLD.session_id IS NOT NEW.session_id OR OLD.disabled IS NOT NEW.disabled
        BEGIN SELECT ql_signal('w:' || NEW.worker_id); END;`);
  }

  /** After a commit (or an autocommit statement): the recorded signals go out. */
  private flushSignals(): void {
    if (this.pendingSignals.length === 0 || this.native.inTransaction) return;
    const payloads = this.pendingSignals;
    this.pendingSignals = [];
    for (const payload of payloads) {
      const signal = parseQueueSignal(payload);
      if (signal) this.hub.emit(signal);
    }
  }

  async migrationsApplied(): Promise<boolean> {
    if (this.migrated) return true;
    const table = await this.one<{ n: number }>(
      `SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`,
    );
    const applied = table?.n
      ? await this.one<{ n: number }>('SELECT count(*) AS n FROM schema_migrations')
      : undefined;
    this.migrated = (applied?.n ?? 0) >= SQLITE_MIGRATIONS.length;
    return this.migrated;
  }

  one<T>(sql: string, params?: SqlParams): Promise<T | undefined> {
    return this.single(() => this.exec(sql, params, this.firstRow) as T | undefined);
  }
  many<T>(sql: string, params?: SqlParams): Promise<T[]> {
    return this.single(() => this.exec(sql, params, this.allRows) as T[]);
  }
  run(sql: string, params?: SqlParams): Promise<number> {
    return this.single(() => this.exec(sql, params, (s, a) => s.run(a).changes));
  }

  /** BEGIN IMMEDIATE … COMMIT around fn, serialised with every other statement of this process. */
  async transaction<T>(fn: (tx: SqlTransaction) => Promise<T>): Promise<T> {
    return this.exclusive(async () => {
      await this.withBusyRetry(() => this.native.exec('BEGIN IMMEDIATE'));
      this.statements.add();
      const tx: SqlTransaction = {
        one: async (sql, params) => this.exec(sql, params, this.firstRow) as never,
        many: async (sql, params) => this.exec(sql, params, this.allRows) as never,
        run: async (sql, params) => this.exec(sql, params, (s, a) => s.run(a).changes),
        lock: async () => undefined,
      };
      try {
        const result = await fn(tx);
        this.native.exec('COMMIT');
        this.statements.add();
        this.flushSignals();
        return result;
      } catch (error) {
        if (this.native.inTransaction) this.native.exec('ROLLBACK');
        this.pendingSignals = [];
        throw error;
      }
    });
  }

  /** The connection's page cache, mmap and WAL settings, read back from SQLite. */
  pragmas(): SqlitePragmas {
    const read = (name: string) => this.native.pragma(name, { simple: true }) as number;
    const pageSize = read('page_size');
    const cacheSize = read('cache_size');
    return {
      pageSize,
      cacheSize,
      cacheKiB: cacheSize < 0 ? -cacheSize : (cacheSize * pageSize) / 1024,
      mmapSize: read('mmap_size'),
      walAutocheckpoint: read('wal_autocheckpoint'),
      journalMode: String(this.native.pragma('journal_mode', { simple: true })),
    };
  }

  async ping(): Promise<void> {
    await this.one('SELECT 1 AS ok');
  }

  async close(): Promise<void> {
    await this.exclusive(async () => {
      this.cache.clear();
      if (this.dataSource.isInitialized) await this.dataSource.destroy();
    });
  }

  private exec<T>(
    sql: string,
    params: SqlParams | undefined,
    call: (statement: BetterSqlite3.Statement, args: Record<string, unknown>) => T,
  ): T {
    let prepared = this.cache.get(sql);
    if (!prepared) {
      const compiled = compileSqlite(sql);
      prepared = { compiled, statement: this.native.prepare(compiled.text) };
      this.cache.set(sql, prepared);
    }
    const args: Record<string, unknown> = {};
    for (const name of prepared.compiled.names) {
      const value = name === 'now' && !(params && 'now' in params) ? this.clock.now() : params?.[name];
      if (value === undefined) throw new Error(`SQL parameter :${name} has no value`);
      args[name] = typeof value === 'boolean' ? (value ? 1 : 0) : value;
    }
    this.statements.add();
    return call(prepared.statement, args);
  }

  /**
   * Runs the statement to completion and returns its first row. Not `.get()`: a write stepped only to
   * its first row (UPDATE … RETURNING) commits in sqlite3_reset, where SQLite skips the WAL hook, so the
   * auto-checkpoint would never run and a heartbeat-only workload would grow the WAL without bound.
   */
  private readonly firstRow = (statement: BetterSqlite3.Statement, args: Record<string, unknown>): unknown =>
    this.allRows(statement, args)[0];

  private readonly allRows = (statement: BetterSqlite3.Statement, args: Record<string, unknown>): unknown[] => {
    const rows = statement.all(args) as unknown[];
    this.statements.addRows(rows.length);
    return rows;
  };

  /** One autocommit statement; runs at once when no transaction holds the connection. */
  private async single<T>(fn: () => T): Promise<T> {
    // An autocommit statement: its signals go out once it committed; one that failed wrote nothing.
    const flushed = () => {
      let result: T;
      try {
        result = fn();
      } catch (error) {
        this.pendingSignals = [];
        throw error;
      }
      this.flushSignals();
      return result;
    };
    if (!this.busy) {
      try {
        return flushed();
      } catch (error) {
        if (!isBusy(error)) throw error;
      }
    }
    // A retry waits, and a transaction may open meanwhile: from here on take the queue.
    return this.exclusive(() => this.withBusyRetry(flushed));
  }

  private async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const previous = this.queue;
    let release!: () => void;
    this.queue = new Promise<void>((resolve) => (release = resolve));
    await previous;
    this.busy = true;
    try {
      return await fn();
    } finally {
      this.busy = false;
      release();
    }
  }

  private async withBusyRetry<T>(fn: () => T | Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (error) {
        if (!isBusy(error)) throw error;
        if (attempt >= this.busyRetries) throw new UnavailableError('database_busy', 'SQLite stayed busy');
        await new Promise((resolve) =>
          setTimeout(resolve, Math.min(2 ** attempt, 50) * (0.5 + Math.random())),
        );
      }
    }
  }
}


function isBusy(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_BUSY_SNAPSHOT' || code === 'SQLITE_LOCKED';
}
