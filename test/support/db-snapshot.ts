import { SqlDatabase } from '@ql/persistence';

const TABLES = ['workers', 'worker_sessions', 'api_keys', 'audit_log', 'revoked_certificates'];

/** Every row of every table (or of `tables`), for "a rejected request changes nothing" assertions. */
export async function snapshotDatabase(
  db: SqlDatabase,
  tables: readonly string[] = TABLES,
): Promise<Record<string, unknown[]>> {
  const result: Record<string, unknown[]> = {};
  for (const table of tables) {
    const rows = await db.many<Record<string, unknown>>(`SELECT * FROM ${table}`);
    result[table] = rows.map((row) => JSON.stringify(row, Object.keys(row).sort())).sort();
  }
  return result;
}
