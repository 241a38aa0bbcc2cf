import { ChildProcess, execFile, spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { checkEntryArgs, guardStdio, WORKER_EXIT, writeErr, writeOut } from '@ql/contracts';
import { dirname, extname, join } from 'node:path';
import { CONTROL_PLANE_ENV, CONTROL_PLANE_NODE_FLAGS } from './node-flags';
import type { MigratedMessage, ReadyMessage } from './main';
import { quickstartWorkerState } from './quickstart-worker-state';
import { RestartBackoff } from './restart-backoff';
import { EXIT } from './start-failure';

/**
 * `npm start`: the quickstart in one command — the control plane on the configured (by default
 * standalone SQLite) profile, then, once *this* control plane says it is ready (an IPC message, so a
 * control plane already running on the same ports is never mistaken for it), one local worker
 * (`worker-1`), supervised: restarted with a backoff after a non-zero exit (a fenced or expired
 * session exits 3 by design), except after a configuration error (2), a disabled worker (5), a
 * superseded certificate (7), a refused enrollment (8), a revoked certificate (11) or a protocol the
 * control plane does not serve (15). The worker joins through enrollment (ADR
 * 0045): its key and certificate live beside its journal (`./var/worker/<id>/tls/`), and whenever it
 * holds no usable certificate the quickstart makes it a token (`enroll-token create`) first. SIGINT/SIGTERM/SIGHUP stops the worker first (drain, offline), then the
 * control plane.
 */

const USAGE = `usage: npm start   (node dist/apps/control-plane/src/quickstart.js)
Starts the control plane (QL_PROFILE, standalone by default: SQLite in ./var/ql.sqlite, a development
PKI in ./var/pki) and, once it is ready, one supervised local worker (QL_WORKER_ID, default worker-1).
It takes no arguments: settings are QL_* environment variables (npm run config-docs). Ctrl-C, SIGTERM
or SIGHUP (the terminal closed) stops the worker first (drain, offline), then the control plane.`;
const usage = checkEntryArgs(process.argv.slice(2), USAGE);
if (usage !== undefined) process.exit(usage);
guardStdio();

// Children run the way this process runs (`node dist/…/quickstart.js`, or the sources in tests).
const file = (path: string) => join(__dirname, `${path}${extname(__filename)}`);
const entry = (path: string) => [...process.execArgv, file(path)];
/**
 * The worker starts as on every deployment: through bin/ql-worker, which picks the V8 flags of its
 * machine class and execs node in its place (ADR 0046), so the child's pid is the worker's. It is
 * told this node, the worker's main beside this file, and this process's node options (the sources'
 * loader in tests) as NODE_OPTIONS, since the launcher puts only V8 flags on node's command line.
 */
const fromSources = extname(__filename) === '.ts';
const workerLauncher = join(
  __dirname,
  ...(fromSources ? ['..', '..', '..'] : ['..', '..', '..', '..']),
  'bin',
  'ql-worker',
);
// Built: the worker's bundle, as bin/ql-worker starts it by default (ADR 0049); from the sources, its main.
const workerMain = fromSources
  ? file('../../worker/src/main')
  : join(__dirname, '../../worker/bundle/main.js');
const quoted = (arg: string) => `"${arg.replace(/[\\"]/g, '\\$&')}"`;
const workerNodeOptions = [...process.execArgv.map(quoted), process.env.NODE_OPTIONS ?? '']
  .filter(Boolean)
  .join(' ');
const workerId = process.env.QL_WORKER_ID ?? 'worker-1';
const backoff = new RestartBackoff();
let worker: ChildProcess | undefined;
let ready: ReadyMessage | undefined;
let restartTimer: NodeJS.Timeout | undefined;
let stopping = false;
/** The worker's exit on stop was not 0 (it crashed or did not go offline): the quickstart says so. */
let workerStopFailed = false;
/** The worker's state is not in its usual folder (another control plane's): said once. */
let announcedState = false;

function log(level: 'info' | 'warn' | 'error', msg: string, fields: Record<string, unknown> = {}): void {
  writeOut(
    `${JSON.stringify({ time: new Date().toISOString(), level, msg: `quickstart: ${msg}`, ...fields })}\n`,
  );
}

const exitText = (code: number | null, signal: NodeJS.Signals | null) =>
  code !== null ? `code ${code}` : `signal ${signal}`;

// Own process groups: a terminal Ctrl-C reaches only this process, which stops the worker first.
const controlPlane = spawn(process.execPath, [...CONTROL_PLANE_NODE_FLAGS, ...entry('main')], {
  env: { ...process.env, ...CONTROL_PLANE_ENV },
  stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
  detached: true,
});

/** The worker's own files (ADR 0045): beside its state, made by the worker when it enrolls. */
const workerFiles = (state: string) => ({
  cert: process.env.QL_WORKER_TLS_CERT ?? join(state, 'tls', 'worker.crt'),
  key: process.env.QL_WORKER_TLS_KEY ?? join(state, 'tls', 'worker.key'),
});

/** Whether `path` holds a certificate that has not expired (its key is the worker's to check). */
function usableCertificate(path: string): boolean {
  try {
    return Date.parse(new X509Certificate(readFileSync(path)).validTo) > Date.now();
  } catch {
    return false;
  }
}

/**
 * A token for the worker when it needs one (no usable certificate yet): `cli enroll-token create
 * --worker <id>`, run the way the control plane runs, on its database. Its JSON answer is read here and
 * the token handed to the worker's environment only: never logged, never written.
 */
function enrollmentToken(certPath: string): Promise<string | undefined> {
  if (process.env.QL_WORKER_ENROLL_TOKEN) return Promise.resolve(process.env.QL_WORKER_ENROLL_TOKEN);
  // The operator's token file: the worker reads it (a token here too would be two settings, exit 2).
  if (process.env.QL_WORKER_ENROLL_TOKEN_FILE) return Promise.resolve(undefined);
  if (usableCertificate(certPath)) return Promise.resolve(undefined);
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [...entry('cli'), 'enroll-token', 'create', '--worker', workerId],
      { env: { ...process.env, ...CONTROL_PLANE_ENV }, encoding: 'utf8' },
      (error, stdout, stderr) => {
        if (error) return reject(new Error(`enroll-token create failed: ${stderr.trim() || error.message}`));
        try {
          resolve((JSON.parse(stdout) as { token: string }).token);
        } catch {
          reject(new Error('enroll-token create did not answer JSON'));
        }
      },
    ),
  );
}

function startWorker(from: ReadyMessage): void {
  if (stopping) return;
  // Its journal, run folders, bundles and TLS files sit beside the dev PKI (`./var/worker/<id>/…` by
  // default): a quickstart pointed at another folder keeps all of its state there, and two never share
  // a journal. They belong to one control plane (its database and CA): started on another, the worker
  // gets a folder of its own and enrolls there, instead of presenting a certificate that plane never
  // issued and cannot renew (issue 29 item 8).
  const { folder: state, moved } = quickstartWorkerState(
    join(dirname(from.devPkiDir), 'worker'),
    workerId,
    from.planeIdentity,
  );
  if (moved && !announcedState) {
    announcedState = true;
    log(
      'info',
      `${workerId} keeps its state in ${state}: ${join(dirname(from.devPkiDir), 'worker', workerId)} belongs to another control plane (database or CA)`,
      { state },
    );
  }
  const files = workerFiles(state);
  enrollmentToken(files.cert).then(
    (token) => spawnWorker(from, state, files, token),
    (error: Error) => log('error', `${workerId} could not be enrolled: ${error.message}; not starting it`),
  );
}

function spawnWorker(
  from: ReadyMessage,
  state: string,
  files: { cert: string; key: string },
  token: string | undefined,
): void {
  if (stopping) return;
  const startedAt = Date.now();
  if (token) log('info', `${workerId} enrolls with a new token`);
  const child = spawn(workerLauncher, [], {
    stdio: 'inherit',
    detached: true,
    env: {
      ...process.env,
      QL_WORKER_NODE: process.execPath,
      QL_WORKER_ENTRY: workerMain,
      ...(workerNodeOptions ? { NODE_OPTIONS: workerNodeOptions } : {}),
      QL_PROFILE: 'worker',
      QL_WORKER_CONTROL_PLANE_URL:
        process.env.QL_WORKER_CONTROL_PLANE_URL ?? `https://127.0.0.1:${new URL(from.ingressUrl).port}`,
      QL_WORKER_TLS_CA: process.env.QL_WORKER_TLS_CA ?? from.tlsCaPath,
      QL_WORKER_TLS_CERT: files.cert,
      QL_WORKER_TLS_KEY: files.key,
      ...(token ? { QL_WORKER_ENROLL_TOKEN: token } : {}),
      QL_WORKER_JOURNAL_DIR: process.env.QL_WORKER_JOURNAL_DIR ?? join(state, 'journal'),
      QL_WORKER_WORK_DIR: process.env.QL_WORKER_WORK_DIR ?? join(state, 'runs'),
      QL_WORKER_BUNDLE_CACHE_DIR: process.env.QL_WORKER_BUNDLE_CACHE_DIR ?? join(state, 'bundles'),
    },
  });
  worker = child;
  log('info', `${workerId} started`, { pid: child.pid });
  // The launcher missing or not executable: there is nothing to restart.
  child.on('error', (error) => {
    worker = undefined;
    log('error', `${workerId} could not be started: ${error.message}; not restarting it`);
  });
  child.on('exit', (code, signal) => {
    worker = undefined;
    if (stopping) return;
    const how = exitText(code, signal);
    const final: readonly (number | null)[] = [
      WORKER_EXIT.ok,
      WORKER_EXIT.config,
      WORKER_EXIT.disabled,
      WORKER_EXIT.certificateSuperseded,
      WORKER_EXIT.enrollmentRefused,
      WORKER_EXIT.certificateRevoked,
      WORKER_EXIT.protocolUnsupported,
    ];
    if (final.includes(code)) {
      const why =
        code === WORKER_EXIT.config
          ? ' (configuration error: fix the QL_WORKER_* settings)'
          : code === WORKER_EXIT.disabled
            ? ` (disabled by an operator: POST /api/v1/workers/${workerId}/enable, then stop and run npm start again)`
            : code === WORKER_EXIT.certificateSuperseded
              ? ' (its certificate was renewed elsewhere: revoke the worker, remove its tls folder, run npm start again)'
              : code === WORKER_EXIT.enrollmentRefused
                ? ' (its enrollment token was refused)'
                : code === WORKER_EXIT.certificateRevoked
                  ? ' (its certificate was revoked and put aside: stop and run npm start again, which enrolls it with a new token)'
                  : code === WORKER_EXIT.protocolUnsupported
                    ? ' (the control plane serves no protocol version it speaks: check QL_WORKER_PROTOCOL_MAX, or upgrade)'
                    : '';
      log('error', `${workerId} exited with ${how}${why}; not restarting it`, { code, signal });
      return;
    }
    const delayMs = backoff.delayAfter(Date.now() - startedAt);
    log('warn', `${workerId} exited with ${how}; restarting it in ${delayMs / 1000} s`, {
      code,
      signal,
      delayMs,
    });
    restartTimer = setTimeout(() => startWorker(from), delayMs);
  });
}

/** The README's way to make the first key: it prints the key's token once. */
const FIRST_KEY = 'npm run api-key -- --name me --role admin';

controlPlane.on('message', (message: Partial<ReadyMessage> | MigratedMessage) => {
  if (message?.type === 'control-plane-migrated') {
    log('info', 'control plane ready', { pid: controlPlane.pid });
    if (ready) howToConnect(ready);
    return;
  }
  if (message?.type !== 'control-plane-ready' || ready) return;
  ready = message as ReadyMessage;
  // Truthful: "ready" only when /readyz would say 200 (a cluster replica waits for `npm run migrate`).
  if (ready.migrationsPending)
    log('warn', 'control plane listening; not ready: migrations pending (run `npm run migrate`)', {
      pid: controlPlane.pid,
    });
  else {
    log('info', 'control plane ready', { pid: controlPlane.pid });
    howToConnect(ready);
  }
  startWorker(ready);
});

/** Where the web console is and how to make the key that signs in to it (README, "Quickstart"). */
function howToConnect(from: ReadyMessage): void {
  // A listener on every interface is reached on this machine's loopback.
  const url = new URL(from.adminUrl);
  if (url.hostname === '0.0.0.0' || url.hostname === '[::]') url.hostname = '127.0.0.1';
  const consoleUrl = url.href;
  log('info', `web console at ${consoleUrl}; sign in with an API key: ${FIRST_KEY}`, {
    console: consoleUrl,
    firstKey: FIRST_KEY,
  });
}

controlPlane.on('exit', (code, signal) => {
  const how = exitText(code, signal);
  if (!ready) {
    writeErr(`quickstart: the control plane did not start (${how}); no worker was started\n`);
  } else if (!stopping) {
    log('error', `the control plane exited with ${how}; stopping ${workerId}`, { code, signal });
  }
  stopping = true;
  clearTimeout(restartTimer);
  worker?.kill('SIGTERM');
  process.exitCode = code ?? EXIT.failed;
  if (workerStopFailed && code === EXIT.ok) process.exitCode = EXIT.failed;
});

function stop(signal: NodeJS.Signals): void {
  if (stopping) return;
  stopping = true;
  clearTimeout(restartTimer);
  const stopControlPlane = () => controlPlane.kill(signal);
  if (worker) {
    worker.once('exit', (code, signal) => {
      if (code !== WORKER_EXIT.ok) {
        workerStopFailed = true;
        log('error', `${workerId} exited with ${exitText(code, signal)} while stopping`, { code, signal });
      }
      stopControlPlane();
    });
    worker.kill(signal);
  } else {
    stopControlPlane();
  }
}

process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
// Closing the terminal: the children are in their own process groups and would not get it.
process.on('SIGHUP', () => stop('SIGTERM'));
