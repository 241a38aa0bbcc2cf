import { closeSync, existsSync, fsyncSync, openSync, renameSync, statSync, unlinkSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, ControlPlaneConfig } from '../config/config';
import { sqlitePathOf } from '../core/plane-lock';

export interface SqliteBackup {
  readonly file: string;
  readonly bytes: number;
  readonly pages: number;
}

/**
 * A consistent copy of the control plane's SQLite database while it runs: SQLite's online backup
 * (every committed transaction, the WAL's included, none half), checked with `integrity_check`, then
 * renamed into place, so `out` is either a whole good copy or absent. A copy of the file with `cp`
 * would miss what the WAL holds, or catch a page mid-write.
 */
export async function backupSqlite(sourcePath: string, outPath: string): Promise<SqliteBackup> {
  const source = resolve(sourcePath);
  const out = resolve(outPath);
  if (!existsSync(source)) throw new ConfigError(`backup: no database at ${source}`);
  if (out === source) throw new ConfigError('backup: --out is the database itself');
  if (existsSync(out))
    throw new ConfigError(`backup: ${out} exists; name a new file (a backup never overwrites)`);
  if (!existsSync(dirname(out))) throw new ConfigError(`backup: the folder of ${out} does not exist`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on use, like every CLI command's modules
  const Database = require('better-sqlite3') as typeof import('better-sqlite3');
  const partial = `${out}.partial-${process.pid}`;
  const db = new Database(source, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 10000');
    await db.backup(partial);
  } catch (error) {
    if (existsSync(partial)) unlinkSync(partial);
    throw error;
  } finally {
    db.close();
  }
  const copy = new Database(partial, { fileMustExist: true });
  let pages: number;
  try {
    const check = copy.pragma('integrity_check', { simple: true }) as string;
    if (check !== 'ok') throw new Error(`backup: the copy fails its integrity check (${check})`);
    // One file that opens anywhere: the copy's own WAL folded in and switched off.
    copy.pragma('journal_mode = DELETE');
    pages = copy.pragma('page_count', { simple: true }) as number;
  } catch (error) {
    copy.close();
    unlinkSync(partial);
    throw error;
  }
  copy.close();
  const fd = openSync(partial, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(partial, out);
  return { file: out, bytes: statSync(out).size, pages };
}

/** `backup --out <file>`: the copy's `{file, bytes, pages}` on stdout; PostgreSQL is pg_dump's. */
export async function runBackupCommand(
  config: ControlPlaneConfig,
  args: string[],
  sayDatabase: (sqlitePath: string) => void,
): Promise<number> {
  const { values } = parseArgs({ args, options: { out: { type: 'string' } } });
  if (values.out === undefined) throw new ConfigError('backup: --out <file> is required');
  const sqlitePath = sqlitePathOf(config.databaseUrl);
  if (sqlitePath === undefined)
    throw new ConfigError(
      'backup copies a SQLite database; for PostgreSQL use pg_dump (docs/operations.md, "Backup and restore")',
    );
  sayDatabase(sqlitePath);
  process.stdout.write(`${JSON.stringify(await backupSqlite(sqlitePath, values.out), null, 2)}\n`);
  return 0;
}
