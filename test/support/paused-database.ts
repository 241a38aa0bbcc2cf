import { setTimeout as delay } from 'node:timers/promises';
import { SqlDatabase, SqlParams, SqlTransaction } from '@ql/persistence';

/**
 * `inner`, except that inside a transaction the first statement matching `after` hands its rows back
 * only once `between()` has settled: another connection acts at that point every time, not by luck.
 */
export function pausedAfter(inner: SqlDatabase, after: RegExp, between: () => Promise<void>): SqlDatabase {
  let armed = true;
  const pause = async <T>(sql: string, result: T): Promise<T> => {
    if (armed && after.test(sql)) {
      armed = false;
      await between();
    }
    return result;
  };
  const paused = (tx: SqlTransaction): SqlTransaction => ({
    one: async <T>(sql: string, params?: SqlParams) => pause(sql, await tx.one<T>(sql, params)),
    many: async <T>(sql: string, params?: SqlParams) => pause(sql, await tx.many<T>(sql, params)),
    run: async (sql, params) => pause(sql, await tx.run(sql, params)),
    lock: (key) => tx.lock(key),
  });
  return overriding(inner, { transaction: (fn) => inner.transaction((tx) => fn(paused(tx))) });
}

/** `inner`, calling `entered` each time a transaction is asked for (before it begins). */
export function announcingTransactions(inner: SqlDatabase, entered: () => void): SqlDatabase {
  return overriding(inner, {
    transaction: (fn) => {
      entered();
      return inner.transaction(fn);
    },
  });
}

/** `inner` with some of its statement and transaction calls replaced; everything else passes through. */
export function overriding(
  inner: SqlDatabase,
  replaced: Partial<Pick<SqlDatabase, 'one' | 'many' | 'run' | 'transaction'>>,
): SqlDatabase {
  return {
    dialect: inner.dialect,
    statements: inner.statements,
    one: replaced.one ?? (<T>(sql: string, params?: SqlParams) => inner.one<T>(sql, params)),
    many: replaced.many ?? (<T>(sql: string, params?: SqlParams) => inner.many<T>(sql, params)),
    run: replaced.run ?? ((sql, params) => inner.run(sql, params)),
    transaction: replaced.transaction ?? ((fn) => inner.transaction(fn)),
    ping: () => inner.ping(),
    migrationsApplied: () => inner.migrationsApplied(),
    close: () => inner.close(),
  };
}

/**
 * PostgreSQL: until a backend of this database waits for a lock, or `stop()` says the wait is moot.
 * A condition polled on the server (pg_stat_activity has no event to await).
 */
export async function untilLockWaiter(db: SqlDatabase, stop: () => boolean): Promise<void> {
  while (!stop()) {
    const row = await db.one<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (Number(row!.n) >= 1) return;
    await delay(5);
  }
}
