import { migratePostgres } from '../postgres/postgres-database';
import { SqliteDatabase } from '../sqlite/sqlite-database';

export type MigrationTarget = { dialect: 'sqlite'; path: string } | { dialect: 'postgres'; url: string };

/** `npm run migrate`, standalone start and the test harness all come through here. */
export async function runMigrations(target: MigrationTarget): Promise<void> {
  if (target.dialect === 'postgres') return migratePostgres(target.url);
  const db = await SqliteDatabase.open({ path: target.path }, { now: () => Date.now() }, true);
  await db.close();
}
