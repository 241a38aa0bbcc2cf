/**
 * A real control plane for the process-level benchmarks: `dist/apps/control-plane/src/main.js` in its
 * own process (as `npm run start:control-plane` starts it), a dev PKI in a temp folder, a fresh
 * database per dialect, and an admin API key made by the real CLI.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { CONTROL_PLANE_ENV, CONTROL_PLANE_NODE_FLAGS } from '../../apps/control-plane/src/node-flags';
import { loadConfig } from '../../apps/control-plane/src/config/config';
import { DevPkiPaths, ensureDevPki } from '../../apps/control-plane/src/pki';
import type { ReadyMessage } from '../../apps/control-plane/src/main';
import type { WorkerTlsCredentials } from '../../apps/worker/src/ingress-client/worker-ingress-https.client';
import { createBenchDatabase } from './postgres-admin';
import { BenchProcess, pollUntil, spawnNode } from './processes';

export type Dialect = 'sqlite' | 'postgres';

/** `dist/` of this build: the bench runs from `dist/bench/lib`. */
export const DIST = resolve(__dirname, '../..');
export const CONTROL_PLANE_MAIN = join(DIST, 'apps/control-plane/src/main.js');
/** The worker as bin/ql-worker starts it: its entry bundled into one file by `npm run build` (ADR 0049). */
export const WORKER_MAIN = join(DIST, 'apps/worker/bundle/main.js');
/** The worker's compiled entry, unbundled: the memory group measures it beside the bundle. */
export const WORKER_UNBUNDLED = join(DIST, 'apps/worker/src/main.js');
const CLI = join(DIST, 'apps/control-plane/src/cli.js');
const TRUST_DOMAIN = 'bench.qinglong.local';

/**
 * The page cache bound, KiB, a plane gives its SQLite connection (`QL_SQLITE_CACHE_MIB` or its
 * default, ADR 0053): the in-process benches open their SQLite with it, as the plane would.
 */
export function planeSqliteCacheKiB(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.QL_SQLITE_CACHE_MIB;
  return loadConfig(raw === undefined ? {} : { QL_SQLITE_CACHE_MIB: raw }).sqliteCacheMiB * 1024;
}

/** A temp folder holding the dev PKI (CA, server pair, one pair per worker id) and worker state. */
export interface BenchPki extends DevPkiPaths {
  credentials(workerId: string): WorkerTlsCredentials;
  workerEnv(workerId: string, ingressUrl: string): Record<string, string>;
  remove(): void;
}

export async function createBenchPki(workers: readonly string[]): Promise<BenchPki> {
  const dir = mkdtempSync(join(tmpdir(), 'ql-bench-pki-'));
  const paths = await ensureDevPki(join(dir, 'pki'), { trustDomain: TRUST_DOMAIN, workers: [...workers] });
  const ca = readFileSync(paths.caCertPath);
  return {
    ...paths,
    credentials: (id) => ({
      caPem: ca,
      certPem: readFileSync(paths.workers[id]!.certPath),
      keyPem: readFileSync(paths.workers[id]!.keyPath),
    }),
    workerEnv: (id, ingressUrl) => ({
      QL_PROFILE: 'worker',
      QL_WORKER_ID: id,
      QL_WORKER_CONTROL_PLANE_URL: ingressUrl,
      QL_WORKER_TLS_CA: paths.caCertPath,
      QL_WORKER_TLS_CERT: paths.workers[id]!.certPath,
      QL_WORKER_TLS_KEY: paths.workers[id]!.keyPath,
      QL_WORKER_JOURNAL_DIR: join(dir, 'state', id, 'journal'),
      QL_WORKER_WORK_DIR: join(dir, 'state', id, 'work'),
      QL_WORKER_LOG_LEVEL: 'info',
    }),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A fresh database for one plane: a SQLite file, or a `ql_bench_<time>` database migrated by the CLI. */
export interface BenchDatabase {
  readonly dialect: Dialect;
  readonly url: string;
  drop(): Promise<void>;
}

export async function createPlaneDatabase(dialect: Dialect, pgAdminUrl: string): Promise<BenchDatabase> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'ql-bench-db-'));
    return {
      dialect,
      url: `sqlite:${join(dir, 'plane.sqlite')}`,
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const db = await createBenchDatabase(pgAdminUrl);
  const migrated = runCli(['migrate'], { QL_PROFILE: 'cluster-control', QL_DATABASE_URL: db.url });
  if (migrated.status !== 0) {
    await db.drop();
    throw new Error(`migrate failed: ${migrated.stderr}`);
  }
  return { dialect, url: db.url, drop: () => db.drop() };
}

function runCli(args: string[], env: Record<string, string>) {
  return spawnSync(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH ?? '', QL_DEV_PKI: 'false', ...env },
    encoding: 'utf8',
  });
}

/**
 * The environment the bench gives a control plane: the launchers' (`CONTROL_PLANE_ENV`, ADR 0024),
 * ports picked by the kernel, real TLS.
 */
export function planeEnv(db: BenchDatabase, pki: BenchPki, extra: Record<string, string> = {}) {
  return {
    ...CONTROL_PLANE_ENV,
    QL_PROFILE: db.dialect === 'sqlite' ? 'standalone' : 'cluster-control',
    QL_DATABASE_URL: db.url,
    QL_ADMIN_PORT: '0',
    QL_INGRESS_PORT: '0',
    QL_DEV_PKI: 'false',
    QL_TLS_CA: pki.caCertPath,
    QL_TLS_CERT: pki.serverCertPath,
    QL_TLS_KEY: pki.serverKeyPath,
    QL_TRUST_DOMAIN: TRUST_DOMAIN,
    QL_LOG_LEVEL: 'warn',
    ...extra,
  };
}

export interface PlaneProcess {
  readonly process: BenchProcess;
  readonly ready: ReadyMessage;
  /** From spawn to the first 200 of GET /readyz. */
  readonly readyMs: number;
  readonly adminToken: string;
  /** An admin API call with the bench's admin key; resolves with status and parsed body. */
  admin<T = unknown>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
  stop(): Promise<void>;
}

/** Starts the control plane in its own process (the launchers' V8 flags unless told) and waits until `/readyz` answers 200. */
export async function startPlaneProcess(
  db: BenchDatabase,
  pki: BenchPki,
  extra: Record<string, string> = {},
  nodeFlags: readonly string[] = CONTROL_PLANE_NODE_FLAGS,
): Promise<PlaneProcess> {
  const proc = spawnNode([...nodeFlags, CONTROL_PLANE_MAIN], planeEnv(db, pki, extra), true);
  const ready = await new Promise<ReadyMessage>((resolveReady, reject) => {
    proc.child.once('message', (m) => resolveReady(m as ReadyMessage));
    void proc.exited.then((code) =>
      reject(new Error(`control plane exited ${code}:\n${proc.output.join('\n')}`)),
    );
  });
  const readyz = `${ready.adminUrl}/readyz`;
  await pollUntil(
    'control plane /readyz 200',
    async () => ((await fetch(readyz)).status === 200 ? true : undefined),
    60_000,
  );
  const readyMs = performance.now() - proc.startedAt;
  const key = runCli(['api-key', '--name', 'bench', '--role', 'admin'], planeEnv(db, pki));
  if (key.status !== 0) throw new Error(`api-key failed: ${key.stderr}`);
  const adminToken = (JSON.parse(key.stdout) as { token: string }).token;
  return {
    process: proc,
    ready,
    readyMs,
    adminToken,
    admin: async <T>(method: string, path: string, body?: unknown) => {
      const res = await fetch(`${ready.adminUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${adminToken}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as T };
    },
    stop: () => proc.stop(),
  };
}
