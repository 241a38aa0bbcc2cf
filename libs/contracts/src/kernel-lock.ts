import type BetterSqlite3 from 'better-sqlite3';
import { closeSync, openSync } from 'node:fs';

/** A held kernel lock: released by `close()` or by the process's death, whatever the death. */
export interface KernelLock {
  readonly open: boolean;
  close(): void;
}

/**
 * The SQLite that takes the lock: better-sqlite3 (a native module built at `npm ci`), or Node's own
 * `node:sqlite` (built into Node ≥ 22.13) where that module cannot load — a worker on arm64 from a
 * bundle built on x64, or installed without native modules (ADR 0059). Both lock the same way (an fcntl
 * write lock on the file), so they exclude each other across processes.
 */
export type KernelLockDriver = 'better-sqlite3' | 'node:sqlite';

/** Thrown when neither driver can load: the message says what this Node and platform need. */
export class KernelLockUnavailableError extends Error {
  override readonly name = 'KernelLockUnavailableError';
}

interface Connection {
  exec(sql: string): void;
  close(): void;
}
type Opener = (path: string) => Connection;
/** The part of `node:sqlite` used here (its types are not in the Node 20 typings). */
interface NodeSqlite {
  DatabaseSync: new (path: string, options: { timeout: number }) => Connection;
}

let chosen: { driver: KernelLockDriver; open: Opener } | undefined;

/**
 * An fcntl write lock on `path` held until the returned handle is closed or the process dies (ADR
 * 0029), or null when another process (or another connection of this one) holds it. Node has no
 * flock/fcntl API, so it is taken through SQLite in exclusive locking mode, which keeps the lock its
 * first write transaction took until the connection closes; busy timeout 0, so a held lock answers
 * at once. The file is never removed: unlinking a lock file lets two processes lock two different
 * inodes. Used by the worker's journal and the control plane's SQLite file (ADR 0054).
 */
export function takeKernelLock(path: string, driver?: KernelLockDriver): KernelLock | null {
  closeSync(openSync(path, 'a', 0o600)); // 0600 from the start, whatever SQLite's default mode
  const db = (driver ? openerOf(driver) : defaultOpener())(path);
  try {
    db.exec('PRAGMA locking_mode = EXCLUSIVE');
    db.exec('PRAGMA journal_mode = MEMORY'); // no -journal file beside it
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
  } catch (error) {
    db.close();
    if (isBusy(error)) return null;
    throw error;
  }
  let open = true;
  return {
    get open() {
      return open;
    },
    close() {
      if (!open) return;
      open = false;
      db.close();
    },
  };
}

/** The driver `takeKernelLock` uses here without a choice: better-sqlite3 when it loads. */
export function kernelLockDriver(): KernelLockDriver {
  defaultOpener();
  return chosen!.driver;
}

function defaultOpener(): Opener {
  if (chosen) return chosen.open;
  let nativeFailure: unknown;
  for (const driver of ['better-sqlite3', 'node:sqlite'] as const) {
    try {
      chosen = { driver, open: openerOf(driver) };
      return chosen.open;
    } catch (error) {
      nativeFailure ??= error;
    }
  }
  throw new KernelLockUnavailableError(
    `no SQLite to take the kernel lock with: better-sqlite3 does not load here (${
      (nativeFailure as Error).message.split('\n')[0]
    }) and this Node (${process.version}) has no node:sqlite; run Node ≥ 22.13, or build better-sqlite3 for this platform (npm rebuild better-sqlite3)`,
  );
}

/** Loads the driver now (throws if it cannot load here) and answers an opener of connections. */
function openerOf(driver: KernelLockDriver): Opener {
  if (driver === 'better-sqlite3') {
    // Loaded here only: the worker needs SQLite for this lock alone (ADR 0029 has its memory cost).
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const Database = require('better-sqlite3') as typeof BetterSqlite3;
    // Probed once: a module built for another platform or Node fails at its first connection.
    new Database(':memory:').close();
    return (path) => new Database(path, { timeout: 0 });
  }
  const sqlite = process.getBuiltinModule?.('node:sqlite') as NodeSqlite | undefined;
  if (!sqlite) throw new Error(`node:sqlite is not built into Node ${process.version}`);
  return (path) => new sqlite.DatabaseSync(path, { timeout: 0 });
}

function isBusy(error: unknown): boolean {
  const e = error as { code?: string; errcode?: number };
  // better-sqlite3 names the code; node:sqlite carries SQLite's number (5: SQLITE_BUSY).
  return e.code === 'SQLITE_BUSY' || (e.code === 'ERR_SQLITE_ERROR' && e.errcode === 5);
}
