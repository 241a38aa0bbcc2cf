import { isDeepStrictEqual } from 'node:util';
import { SqlDatabase } from '@ql/persistence';

/**
 * The tables of the database, read from its own catalogue so a new migration's table is covered
 * without a list to keep up to date. `schema_migrations` is included (no request may touch it);
 * SQLite's own `sqlite_*` tables are not: they are the engine's bookkeeping (AUTOINCREMENT counters,
 * ANALYZE statistics), not rows the application writes.
 */
async function tableNames(db: SqlDatabase): Promise<string[]> {
  const rows = await db.many<{ name: string }>(
    db.dialect === 'sqlite'
      ? `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'`
      : `SELECT table_name AS name FROM information_schema.tables
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`,
  );
  return rows.map((row) => row.name).sort();
}

/** Every row of every table (or of `tables`), for "a rejected request changes nothing" assertions. */
export async function snapshotDatabase(
  db: SqlDatabase,
  tables?: readonly string[],
): Promise<Record<string, unknown[]>> {
  const result: Record<string, unknown[]> = {};
  for (const table of tables ?? (await tableNames(db))) {
    const rows = await db.many<Record<string, unknown>>(`SELECT * FROM "${table.replace(/"/g, '""')}"`);
    // Columns in name order; not a replacer array, which would also drop the keys of a jsonb value.
    const encode = (row: Record<string, unknown>) =>
      JSON.stringify(
        Object.fromEntries(
          Object.keys(row)
            .sort()
            .map((key) => [key, row[key]]),
        ),
      );
    result[table] = rows.map(encode).sort();
  }
  return result;
}

/** The tables whose rows differ between two snapshots, sorted. */
export function changedTables(before: Record<string, unknown[]>, after: Record<string, unknown[]>): string[] {
  return Object.keys(after)
    .filter((table) => !isDeepStrictEqual(after[table], before[table]))
    .sort();
}
