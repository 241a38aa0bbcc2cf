import { ChildProcess, spawn } from 'node:child_process';
import { request } from 'node:http';
import { join } from 'node:path';
import { loadConfig } from './config/config';

/**
 * `npm start`: the quickstart in one command — the control plane on the configured (by default
 * standalone SQLite) profile, then, once `/readyz` answers, one local worker (`worker-1`, using the
 * dev PKI the control plane created). SIGINT/SIGTERM stops the worker first (drain, offline), then
 * the control plane.
 */
const config = loadConfig();
// Own process groups: a terminal Ctrl-C reaches only this process, which stops the worker first.
const controlPlane = spawn(process.execPath, [join(__dirname, 'main.js')], {
  stdio: 'inherit',
  detached: true,
});
let worker: ChildProcess | undefined;
let stopping = false;

function ready(): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(
      { host: config.adminHost, port: config.adminPort, path: '/readyz', timeout: 1000 },
      (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      },
    );
    req.on('error', () => resolve(false));
    req.end();
  });
}

async function startWorker(): Promise<void> {
  for (let i = 0; i < 120 && !stopping; i++) {
    if (await ready()) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  if (stopping) return;
  worker = spawn(process.execPath, [join(__dirname, '../../worker/src/main.js')], {
    stdio: 'inherit',
    detached: true,
    env: {
      ...process.env,
      QL_PROFILE: 'worker',
      QL_WORKER_CONTROL_PLANE_URL:
        process.env.QL_WORKER_CONTROL_PLANE_URL ?? `https://127.0.0.1:${config.ingressPort}`,
      QL_WORKER_TLS_CA: process.env.QL_WORKER_TLS_CA ?? config.tlsCaPath,
    },
  });
  worker.on('exit', (code) => {
    if (!stopping)
      process.stderr.write(`quickstart: the worker exited (${code}); the control plane keeps running\n`);
  });
}

function stop(signal: NodeJS.Signals): void {
  if (stopping) return;
  stopping = true;
  const stopControlPlane = () => controlPlane.kill(signal);
  if (worker && worker.exitCode === null) {
    worker.once('exit', stopControlPlane);
    worker.kill(signal);
  } else {
    stopControlPlane();
  }
}

controlPlane.on('exit', (code) => {
  if (worker && worker.exitCode === null) worker.kill('SIGTERM');
  process.exitCode = code ?? 1;
});
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
void startWorker();
