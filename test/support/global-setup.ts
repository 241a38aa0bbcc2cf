/**
 * jest globalSetup: finds or starts PostgreSQL, builds a migrated template database, and hands both
 * to the test workers through the environment (workers are started after this and inherit it):
 *   QL_TEST_PG_ADMIN_URL  superuser URL of the server's `postgres` database
 *   QL_TEST_PG_TEMPLATE   name of the migrated template; test/support/databases.ts copies it
 *
 * Template choice: one template per jest run, named `ql_test_tpl_<base36 time>_<random>`, dropped by
 * globalTeardown. A fixed name (drop-and-recreate `ql_test_template`) would break two jest runs
 * sharing the machine's server (one run drops the template the other is copying), and a name keyed
 * by a hash of the migration files can go stale when what the migrations depend on changes. The
 * price is running the migrations once per run. Templates and test databases left behind by killed
 * runs are dropped once they are 6 hours old (their age is in their name).
 *
 * After migrating, the template is marked `is_template` and `ALLOW_CONNECTIONS false`: nothing can
 * connect to it by accident, which would make `CREATE DATABASE … TEMPLATE` fail.
 */
import Module from 'node:module';
import { ensurePostgresServer, type PostgresServer } from './postgres-server';
import {
  TEMPLATE_PREFIX,
  TEST_DB_PREFIX,
  databaseNameAge,
  databaseUrl,
  quoteIdent,
  uniqueDatabaseName,
  withAdminClient,
} from './databases';

/** What globalTeardown needs; kept on globalThis because setup and teardown are separate modules. */
export interface HarnessState {
  server: PostgresServer;
  template?: string;
}
export const HARNESS_STATE_KEY = '__qlTestHarness';

type RunMigrations = (target: { dialect: 'postgres'; url: string }) => Promise<unknown>;

/**
 * Kept in a variable on purpose: a literal extensionless `import('…')` fails `tsc` under
 * `moduleResolution: nodenext` (TS2835), and `.js` would not resolve at runtime. SWC compiles this
 * `import()` to `require()` relative to this file, which jest's require hook transpiles.
 */
const RUN_MIGRATIONS_MODULE = '../../libs/persistence/src/migrations/run-migrations';
const STALE_AFTER_MS = 6 * 60 * 60 * 1000;

/** The part of jest's ProjectConfig used here (jest passes it to globalSetup). */
interface ProjectConfigLike {
  moduleNameMapper?: Array<[string, string | string[]]>;
}

export default async function globalSetup(
  _globalConfig?: unknown,
  projectConfig?: ProjectConfigLike,
): Promise<void> {
  const server = await ensurePostgresServer();
  const state: HarnessState = { server };
  (globalThis as Record<string, unknown>)[HARNESS_STATE_KEY] = state;
  try {
    await dropStaleDatabases(server.adminUrl);
    state.template = await withModuleNameMapper(projectConfig?.moduleNameMapper ?? [], () =>
      createTemplate(server.adminUrl),
    );
  } catch (error) {
    await server.stop().catch(() => undefined);
    throw error;
  }
  process.env.QL_TEST_PG_ADMIN_URL = server.adminUrl;
  process.env.QL_TEST_PG_TEMPLATE = state.template;
}

/**
 * globalSetup runs in jest's main process under plain Node `require` (jest only adds its transform
 * hook), so jest's `moduleNameMapper` — the `@ql/*` path aliases the libraries import each other
 * by — does not apply. This applies the project's mappers (already `<rootDir>`-expanded by jest)
 * to Node's resolver while the migrations load and run.
 */
async function withModuleNameMapper<T>(
  mappers: Array<[string, string | string[]]>,
  fn: () => Promise<T>,
): Promise<T> {
  type Resolve = (request: string, ...rest: unknown[]) => string;
  const loader = Module as unknown as { _resolveFilename: Resolve };
  const original = loader._resolveFilename;
  const compiled = mappers.map(([pattern, target]) => [new RegExp(pattern), [target].flat()] as const);
  loader._resolveFilename = function (this: unknown, request: string, ...rest: unknown[]): string {
    for (const [regex, targets] of compiled) {
      const match = regex.exec(request);
      if (!match) continue;
      for (const target of targets) {
        try {
          const mapped = target.replace(/\$(\d+)/g, (_, i: string) => match[Number(i)] ?? '');
          return original.call(this, mapped, ...rest);
        } catch {
          // try the next target
        }
      }
    }
    return original.call(this, request, ...rest);
  };
  try {
    return await fn();
  } finally {
    loader._resolveFilename = original;
  }
}

async function loadRunMigrations(): Promise<RunMigrations> {
  let mod: { runMigrations?: unknown };
  try {
    mod = (await import(RUN_MIGRATIONS_MODULE)) as { runMigrations?: unknown };
  } catch (error) {
    throw new Error(
      `test harness: cannot load ${RUN_MIGRATIONS_MODULE} (needed to migrate the PostgreSQL test ` +
        `template): ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  if (typeof mod.runMigrations !== 'function') {
    throw new Error(`test harness: ${RUN_MIGRATIONS_MODULE} does not export a runMigrations function`);
  }
  return mod.runMigrations as RunMigrations;
}

async function createTemplate(adminUrl: string): Promise<string> {
  const runMigrations = await loadRunMigrations();
  const name = uniqueDatabaseName(TEMPLATE_PREFIX);
  await withAdminClient(adminUrl, (c) => c.query(`CREATE DATABASE ${quoteIdent(name)} TEMPLATE template0`));
  try {
    await runMigrations({ dialect: 'postgres', url: databaseUrl(adminUrl, name) });
    await withAdminClient(adminUrl, async (c) => {
      // A connection the migrator closed may still be exiting on the server side.
      await c.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
        [name],
      );
      await c.query(`ALTER DATABASE ${quoteIdent(name)} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`);
    });
  } catch (error) {
    await dropDatabase(adminUrl, name).catch(() => undefined);
    throw error;
  }
  return name;
}

/** Drops a database, template or not, terminating its connections. */
export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  await withAdminClient(adminUrl, async (c) => {
    const found = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) return;
    await c.query(`ALTER DATABASE ${quoteIdent(name)} WITH IS_TEMPLATE false`);
    await c.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
  });
}

async function dropStaleDatabases(adminUrl: string): Promise<void> {
  const rows = await withAdminClient(adminUrl, async (c) => {
    const result = await c.query<{ datname: string }>(
      "SELECT datname FROM pg_database WHERE datname LIKE 'ql\\_t\\_%' OR datname LIKE 'ql\\_test\\_tpl\\_%'",
    );
    return result.rows;
  });
  for (const { datname } of rows) {
    const age = databaseNameAge(datname, TEST_DB_PREFIX) ?? databaseNameAge(datname, TEMPLATE_PREFIX);
    if (age !== undefined && age > STALE_AFTER_MS) {
      await dropDatabase(adminUrl, datname).catch(() => undefined);
    }
  }
}
