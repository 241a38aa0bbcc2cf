import { Client } from 'pg';
import { ownCpuMs, readProcStat } from './proc-cpu';

export function databaseUrl(adminUrl: string, database: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${encodeURIComponent(database)}`;
  return url.toString();
}

/** The URL without its password, for printing. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '<invalid url>';
  }
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

async function withAdmin<T>(adminUrl: string, fn: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: adminUrl, connectionTimeoutMillis: 5_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export interface BenchPostgresDatabase {
  readonly name: string;
  readonly url: string;
  readonly serverVersion: string;
  drop(): Promise<void>;
}

/** Creates an empty database for this run; throws if the server cannot be reached. */
export async function createBenchDatabase(adminUrl: string): Promise<BenchPostgresDatabase> {
  const name = `ql_bench_${Date.now().toString(36)}`;
  const serverVersion = await withAdmin(adminUrl, async (client) => {
    const { rows } = await client.query<{ v: string }>('SELECT current_setting($1) AS v', ['server_version']);
    await client.query(`CREATE DATABASE ${quoteIdent(name)}`);
    return rows[0]?.v ?? 'unknown';
  });
  let dropped = false;
  return {
    name,
    url: databaseUrl(adminUrl, name),
    serverVersion,
    drop: async () => {
      if (dropped) return;
      dropped = true;
      await withAdmin(adminUrl, async (client) => {
        await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
      });
    },
  };
}

/**
 * The pid of the server's postmaster when it runs on this host and /proc shows it (the parent of
 * this connection's backend, named `postgres`); undefined otherwise (a remote or hidden server).
 * Its own CPU plus its children's (live backends and helpers, and the exited ones it reaped) is what
 * the whole server spent.
 */
export async function localPostmasterPid(url: string): Promise<number | undefined> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const backend = readProcStat(rows[0]!.pid);
    const postmaster = readProcStat(backend.ppid);
    return backend.comm === 'postgres' && postmaster.comm === 'postgres' ? postmaster.pid : undefined;
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Own CPU ms of every live backend connected to `database`, by pid, when the server is local; read
 * through `client` (connected to another database, so that it is not counted itself).
 */
export async function backendsCpuMs(client: Client, database: string): Promise<Map<number, number>> {
  const { rows } = await client.query<{ pid: number }>(
    'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
    [database],
  );
  const byPid = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      byPid.set(pid, ownCpuMs(readProcStat(pid)));
    } catch {
      // ended between the query and the read: as if it were not listed
    }
  }
  return byPid;
}
