/** Named parameters (`:name`) bound by name; booleans are encoded per dialect; a Buffer is a BLOB / bytea. */
export type SqlParams = Readonly<Record<string, string | number | boolean | null | Buffer>>;

/** The statements a repository issues, either autocommit or inside one transaction. */
export interface SqlExecutor {
  one<T>(sql: string, params?: SqlParams): Promise<T | undefined>;
  many<T>(sql: string, params?: SqlParams): Promise<T[]>;
  /** Returns the number of rows changed. */
  run(sql: string, params?: SqlParams): Promise<number>;
}

export type Dialect = 'sqlite' | 'postgres';

/**
 * A database the repositories can use without knowing the dialect. SQL is written once with named
 * parameters and these macros, which each dialect compiles:
 *   {now}              the database clock (PostgreSQL `clock_timestamp()`, read after locks are held;
 *                      SQLite: the process clock, the same machine's clock)
 *   {now + :param}     the clock plus `:param` milliseconds
 *   {nowMs}            the clock as epoch milliseconds (an integer in both dialects)
 *   {clockMs}          PostgreSQL: NULL (a SQL function reads `clock_timestamp()` itself), or the bound
 *                      `:now` of a controllable clock; SQLite: `:now`
 *   {ms :param}        `:param` epoch milliseconds as a time value of the dialect
 *   {forUpdate}        a row lock on PostgreSQL; nothing on SQLite, where BEGIN IMMEDIATE already
 *                      holds the database's only write lock
 *   {skipLocked}       PostgreSQL `FOR UPDATE SKIP LOCKED` (rows another transaction holds are passed
 *                      over); nothing on SQLite
 *   {pinnedNow}        a model's controllable clock when it has one, else NULL: a SQL function given
 *                      it reads the database clock itself, after its locks (PostgreSQL only)
 */
export interface SqlDatabase extends SqlExecutor {
  readonly dialect: Dialect;
  readonly statements: StatementCounter;
  transaction<T>(fn: (tx: SqlTransaction) => Promise<T>): Promise<T>;
  ping(): Promise<void>;
  migrationsApplied(): Promise<boolean>;
  close(): Promise<void>;
}

export interface SqlTransaction extends SqlExecutor {
  /** Serialises transactions on `key` until commit (PostgreSQL advisory lock; SQLite: already serial). */
  lock(key: string): Promise<void>;
}

/**
 * Counts statements sent to the database, so tests can prove a request made none; on SQLite also the
 * rows statements handed back (a write's RETURNING rows are buffered by better-sqlite3 first), so tests
 * can prove a path reads back only what it needs (ADR 0025).
 */
export class StatementCounter {
  private count = 0;
  private returned = 0;
  add(n = 1): void {
    this.count += n;
  }
  addRows(n: number): void {
    this.returned += n;
  }
  get value(): number {
    return this.count;
  }
  /** Rows handed back so far (SQLite only; PostgreSQL leaves it at 0). */
  get rows(): number {
    return this.returned;
  }
}

export interface CompiledSql {
  readonly text: string;
  readonly names: readonly string[];
}

const PARAM = /(?<![:\w]):([A-Za-z_]\w*)/g;

/**
 * Rewrites the dialect macros; the caller then binds named parameters. `clockParam`: PostgreSQL reads
 * the time from the bound `:now` instead of `clock_timestamp()` (models with a controllable clock).
 */
export function expandMacros(sql: string, dialect: Dialect, clockParam = false): string {
  const pgNow = clockParam ? `to_timestamp(:now::float8 / 1000)` : 'clock_timestamp()';
  const pgNowMs = clockParam ? `:now::int8` : `(extract(epoch from clock_timestamp()) * 1000)::int8`;
  return sql
    .replace(/\{now \+ :(\w+)\}/g, (_m, p: string) =>
      dialect === 'postgres' ? `(${pgNow} + :${p}::int8 * interval '1 millisecond')` : `(:now + :${p})`,
    )
    .replace(/\{ms :(\w+)\}/g, (_m, p: string) =>
      dialect === 'postgres' ? `to_timestamp(:${p}::float8 / 1000)` : `:${p}`,
    )
    .replace(/\{clockMs\}/g, dialect === 'postgres' ? (clockParam ? ':now::int8' : 'NULL::int8') : ':now')
    .replace(/\{pinnedNow\}/g, dialect === 'sqlite' ? ':now' : clockParam ? pgNow : 'NULL::timestamptz')
    .replace(/\{nowMs\}/g, dialect === 'postgres' ? pgNowMs : ':now')
    .replace(/\{now\}/g, dialect === 'postgres' ? pgNow : ':now')
    .replace(/\{forUpdate\}/g, dialect === 'postgres' ? 'FOR UPDATE' : '')
    .replace(/\{skipLocked\}/g, dialect === 'postgres' ? 'FOR UPDATE SKIP LOCKED' : '');
}

/** PostgreSQL: `:name` becomes `$n` in order of first use. */
export function compilePostgres(sql: string, clockParam = false): CompiledSql {
  const names: string[] = [];
  const text = expandMacros(sql, 'postgres', clockParam).replace(PARAM, (_m, name: string) => {
    let index = names.indexOf(name);
    if (index < 0) index = names.push(name) - 1;
    return `$${index + 1}`;
  });
  return { text, names };
}

/** SQLite: better-sqlite3 binds `:name` itself; we only need the names to build the object. */
export function compileSqlite(sql: string): CompiledSql {
  const text = expandMacros(sql, 'sqlite');
  const names = [...new Set(Array.from(text.matchAll(PARAM), (m) => m[1]!))];
  return { text, names };
}

export function bindNames(
  compiled: CompiledSql,
  params: SqlParams | undefined,
  extra?: SqlParams,
): unknown[] {
  return compiled.names.map((name) => {
    const value = extra && name in extra ? extra[name] : params?.[name];
    if (value === undefined) throw new Error(`SQL parameter :${name} has no value`);
    return value;
  });
}

/** Times arrive as epoch ms (SQLite), Date (pg timestamptz) or a numeric string (pg int8). */
export function toMs(value: unknown): number {
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'number') return value;
  if (typeof value === 'string' || typeof value === 'bigint') return Number(value);
  throw new TypeError(`not a time value: ${String(value)}`);
}

export function toInt(value: unknown): number {
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isSafeInteger(n)) throw new TypeError(`not an integer: ${String(value)}`);
  return n;
}

/** A unique constraint refused the write (PostgreSQL 23505, SQLite SQLITE_CONSTRAINT_UNIQUE/PRIMARYKEY). */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

export function isTrue(value: unknown): boolean {
  return value === true || value === 1;
}

export function toMsOrNull(value: unknown): number | null {
  return value === null || value === undefined ? null : toMs(value);
}

/** The database's time as epoch ms (PostgreSQL: read after the locks the transaction holds). */
export async function readNow(tx: SqlExecutor): Promise<number> {
  const row = await tx.one<{ now: number | Date }>('SELECT {now} AS now');
  return toMs(row!.now);
}
