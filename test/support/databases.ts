/**
 * Per-test-file databases.
 *
 *   const db = await createPostgresDatabase();   // in beforeAll; migrated (copied from the template)
 *   ... connect to db.url ...
 *   await db.drop();                              // in afterAll, after closing your pools
 *
 *   const file = createSqliteFile();              // a path in a fresh temp folder; not migrated
 *   ... runMigrations({ dialect: 'sqlite', path: file.path }) ...
 *   file.remove();
 *
 * jest's globalSetup (test/support/global-setup.ts) provides the server and the migrated template
 * through QL_TEST_PG_ADMIN_URL and QL_TEST_PG_TEMPLATE.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';

export interface TestPostgresDatabase {
  /** Connection URL for the new database (same server and credentials as the admin URL). */
  url: string;
  name: string;
  /** Drops the database, terminating any connection still open. Idempotent. */
  drop(): Promise<void>;
}

export interface TestSqliteFile {
  /** A path that does not exist yet, in a folder of its own (so -wal/-shm files go too). */
  path: string;
  remove(): void;
}

/** Prefix of per-test databases; the base-36 creation time after it lets stale ones be swept. */
export const TEST_DB_PREFIX = 'ql_t_';
export const TEMPLATE_PREFIX = 'ql_test_tpl_';

/** `<prefix><base36 ms timestamp>_<8 hex>`: unique, under 63 bytes, and its age is readable. */
export function uniqueDatabaseName(prefix: string): string {
  return `${prefix}${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
}

/** Milliseconds since the database named by `uniqueDatabaseName` was made, or undefined. */
export function databaseNameAge(name: string, prefix: string): number | undefined {
  if (!name.startsWith(prefix)) return undefined;
  const stamp = Number.parseInt(name.slice(prefix.length).split('_')[0] ?? '', 36);
  return Number.isFinite(stamp) && stamp > 0 ? Date.now() - stamp : undefined;
}

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

export function databaseUrl(adminUrl: string, database: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${encodeURIComponent(database)}`;
  return url.toString();
}

/** Runs `fn` on a short-lived admin connection. */
export async function withAdminClient<T>(adminUrl: string, fn: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: adminUrl, connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

function requireEnv(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(
      `${name} is not set: test/support/global-setup.ts did not run. Run tests through jest with the ` +
        'repository jest.config.js (npm test / npx jest).',
    );
  }
  return value;
}

/**
 * A fresh, migrated PostgreSQL database for one test file: `CREATE DATABASE … TEMPLATE <template>`;
 * with `{ migrated: false }` an empty one (what `createdb` makes).
 */
export async function createPostgresDatabase({ migrated = true } = {}): Promise<TestPostgresDatabase> {
  const adminUrl = requireEnv('QL_TEST_PG_ADMIN_URL');
  const template = migrated ? ` TEMPLATE ${quoteIdent(requireEnv('QL_TEST_PG_TEMPLATE'))}` : '';
  const name = uniqueDatabaseName(TEST_DB_PREFIX);
  await withAdminClient(adminUrl, async (client) => {
    for (let attempt = 1; ; attempt++) {
      try {
        await client.query(`CREATE DATABASE ${quoteIdent(name)}${template}`);
        return;
      } catch (error) {
        // 55006 "source database is being accessed by other users": nothing should connect to the
        // template (it has ALLOW_CONNECTIONS false), but retry briefly rather than flake.
        if ((error as { code?: string }).code !== '55006' || attempt >= 5) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  });
  let dropped = false;
  return {
    url: databaseUrl(adminUrl, name),
    name,
    drop: async () => {
      if (dropped) return;
      await withAdminClient(adminUrl, (client) =>
        client.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`),
      );
      dropped = true;
    },
  };
}

/** A fresh SQLite file path in its own temp folder (the caller migrates it). */
export function createSqliteFile(): TestSqliteFile {
  const dir = mkdtempSync(join(tmpdir(), 'ql-test-sqlite-'));
  return {
    path: join(dir, 'ql.sqlite'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
