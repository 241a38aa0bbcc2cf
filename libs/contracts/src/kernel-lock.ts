import type BetterSqlite3 from 'better-sqlite3';
import { closeSync, openSync } from 'node:fs';

/**
 * An fcntl write lock on `path` held until the returned handle is closed or the process dies (ADR
 * 0029), or null when another process (or another connection of this one) holds it. Node has no
 * flock/fcntl API, so it is taken through SQLite (better-sqlite3) in exclusive locking mode, which
 * keeps the lock its first write transaction took until the connection closes; busy timeout 0, so a
 * held lock answers at once. The file is never removed: unlinking a lock file lets two processes lock
 * two different inodes. Used by the worker's journal and the control plane's SQLite file (ADR 0054).
 */
export function takeKernelLock(path: string): BetterSqlite3.Database | null {
  closeSync(openSync(path, 'a', 0o600)); // 0600 from the start, whatever SQLite's default mode
  // Loaded here only: the worker needs SQLite for this lock alone (ADR 0029 has its memory cost).
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const Database = require('better-sqlite3') as typeof BetterSqlite3;
  const db = new Database(path, { timeout: 0 });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('journal_mode = MEMORY'); // no -journal file beside it
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
    return db;
  } catch (error) {
    db.close();
    if ((error as { code?: string }).code === 'SQLITE_BUSY') return null;
    throw error;
  }
}
