import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { LoggedProcess } from './child-process';

export const ROOT = resolve(__dirname, '..', '..');

/**
 * A real entry point (quickstart, control plane, CLI, worker) in a child process, running the
 * TypeScript sources through SWC like a built tree (the quickstart starts its children the same way).
 */
export class EntryPoint extends LoggedProcess {
  /** `launcher`: a command that runs node, e.g. `['unshare', '--pid', '--fork', '--mount-proc']`, or
   * `setpriv …` to limit capabilities (execs node in place: same pid). */
  constructor(
    file: string,
    env: Record<string, string>,
    args: string[] = [],
    launcher: readonly string[] = [],
  ) {
    const node = [process.execPath, ...nodeArgs(file), ...args];
    const [command, ...rest] = [...launcher, ...node];
    super(command!, rest, { cwd: ROOT, env });
  }
}

export const QUICKSTART = 'apps/control-plane/src/quickstart.ts';
export const CONTROL_PLANE = 'apps/control-plane/src/main.ts';
export const CLI = 'apps/control-plane/src/cli.ts';
export const WORKER = 'apps/worker/src/main.ts';
/** The worker's bundle (ADR 0049): what bin/ql-worker starts, made by `npm run build`. */
export const WORKER_BUNDLE = 'dist/apps/worker/bundle/main.js';

/**
 * How node is told to run `file`: its sources through SWC; with `QL_TEST_WORKER_ENTRY=bundle` the worker
 * is the built bundle instead, so every worker test can be run against what deployments start
 * (`npm run build && QL_TEST_WORKER_ENTRY=bundle npx jest …`).
 */
export function nodeArgs(file: string): string[] {
  if (file === WORKER && process.env.QL_TEST_WORKER_ENTRY === 'bundle') return [WORKER_BUNDLE];
  return ['-r', './apps/worker/test-support/swc-register.js', file];
}

/**
 * Runs the CLI once with `env` and `args`: its exit code, its stdout (pretty-printed JSON answers are
 * kept line by line as text) and its stderr.
 */
export async function runCli(env: Record<string, string>, ...args: string[]) {
  const p = new EntryPoint(CLI, env, args);
  const exit = await p.exited;
  const stdout = p
    .messages()
    .map((line) => line.replace(/^\(not JSON\) /, ''))
    .join('\n');
  return { code: exit.code, stdout, stderr: p.stderr.join('\n') };
}

/** `POST <path>` on the admin API of a quickstart started with `env`, with a new admin key (`npm run api-key`). */
export async function adminPost(env: Record<string, string>, path: string): Promise<Response> {
  const key = await runCli(env, 'api-key', '--name', 'ops', '--role', 'admin');
  const token = /"token":\s*"([^"]+)"/.exec(key.stdout)?.[1];
  if (key.code !== 0 || !token) throw new Error(`api-key: ${key.code} ${key.stderr}`);
  return fetch(`http://127.0.0.1:${env.QL_ADMIN_PORT}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
  });
}

/** The CLI run to its end with `input` on stdin (a secret's value), synchronously: code and output. */
export function cliWithInput(env: Record<string, string>, args: string[], input = '') {
  const r = spawnSync(process.execPath, [...nodeArgs(CLI), ...args], {
    cwd: ROOT,
    env,
    input,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * What a quickstart in its own folder `dir` needs: free admin and ingress ports, its SQLite database
 * and dev PKI there, warnings only; `extra` settings on top.
 */
export async function quickstartEnv(
  dir: string,
  extra: Record<string, string> = {},
): Promise<Record<string, string>> {
  return {
    QL_ADMIN_PORT: String(await freePort()),
    QL_INGRESS_PORT: String(await freePort()),
    QL_DATABASE_URL: `sqlite:${join(dir, 'ql.sqlite')}`,
    QL_DEV_PKI_DIR: join(dir, 'pki'),
    QL_LOG_LEVEL: 'warn',
    ...extra,
  };
}

/** A port nothing listens on right now (for settings that must name a fixed port). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  await new Promise((done) => server.close(done));
  return port;
}

/** Whether this process can listen on the port (nobody else holds it). */
export function portIsFree(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((done) => {
    server.once('error', () => done(false));
    server.listen(port, '127.0.0.1', () => server.close(() => done(true)));
  });
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** One JSON POST to a worker ingress with a worker's certificate files. */
export function postIngress(
  origin: string,
  pki: { ca: string; cert: string; key: string },
  path: string,
  body: unknown,
): Promise<{ status: number; body: unknown }> {
  const payload = JSON.stringify(body);
  return new Promise((done, fail) => {
    const req = request(new URL(path, origin), {
      method: 'POST',
      ca: readFileSync(pki.ca),
      cert: readFileSync(pki.cert),
      key: readFileSync(pki.key),
      servername: 'localhost',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
    });
    req.on('error', fail);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        done({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }),
      );
    });
    req.end(payload);
  });
}
