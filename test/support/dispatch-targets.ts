import { PostgresDatabase, SqlDatabase, SqliteDatabase } from '@ql/persistence';
import { createPostgresDatabase, createSqliteFile } from './databases';
import { ManualClock } from './fixtures';

/** A dialect under test: databases that share one controllable clock. */
export interface DispatchTarget {
  readonly clock: ManualClock;
  /** A freshly migrated, empty database. */
  open(): Promise<SqlDatabase>;
  /** A second, independent connection (pool) to the same database. */
  openSecond(): Promise<SqlDatabase>;
  dispose(): Promise<void>;
}

/** One SQLite file per test file; every connection reads time from the shared clock. */
export function sqliteDispatchTarget(): DispatchTarget {
  const file = createSqliteFile();
  const clock = new ManualClock();
  const opened: SqliteDatabase[] = [];
  const open = async (migrate: boolean) => {
    const db = await SqliteDatabase.open({ path: file.path }, clock, migrate);
    opened.push(db);
    return db;
  };
  return {
    clock,
    open: () => open(true),
    openSecond: () => open(false),
    dispose: async () => {
      for (const db of opened) await db.close().catch(() => undefined);
      file.remove();
    },
  };
}

/** One PostgreSQL database per test file; the adapter binds the shared clock instead of clock_timestamp(). */
export function postgresDispatchTarget(): DispatchTarget {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>> | undefined;
  const clock = new ManualClock();
  const opened: PostgresDatabase[] = [];
  const open = async () => {
    database ??= await createPostgresDatabase();
    const db = await PostgresDatabase.open({ url: database.url, poolSize: 8, clock }, false);
    opened.push(db);
    return db;
  };
  return {
    clock,
    open,
    openSecond: open,
    dispose: async () => {
      for (const db of opened) await db.close().catch(() => undefined);
      await database?.drop();
    },
  };
}
