/**
 * The memory group's quickstart part (issue 17, idea 5): `npm start` as a new user runs it — the
 * quickstart process (`dist/apps/control-plane/src/quickstart.js`) in a fresh folder, so its control
 * plane makes the SQLite file and the development PKI (the first start), then starts and supervises
 * `worker-1` — idle for the same time as the other parts, then the RSS of the control plane and of
 * its worker, read from /proc; stopped, then started again in the same folder (a second start, which
 * makes nothing). Ports are picked by the kernel; nothing else differs from `npm start`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { DIST } from './lib/plane';
import { BenchProcess, pollUntil, rssMiB } from './lib/processes';

export interface QuickstartMemory {
  /** In a fresh folder: the control plane makes its database and dev PKI. */
  readonly first: QuickstartStart;
  /** Again in the same folder: everything is there. */
  readonly second: QuickstartStart;
}

export interface QuickstartStart {
  readonly planeMiB: number;
  readonly workerMiB: number;
  /** The quickstart's own process (the supervisor). */
  readonly supervisorMiB: number;
  /** From spawn to the worker's "worker registered" line. */
  readonly registeredMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function quickstartMemory(idleSeconds: number): Promise<QuickstartMemory> {
  const dir = mkdtempSync(join(tmpdir(), 'ql-bench-quickstart-'));
  try {
    const first = await quickstartIn(dir, idleSeconds);
    return { first, second: await quickstartIn(dir, idleSeconds) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function quickstartIn(dir: string, idleSeconds: number): Promise<QuickstartStart> {
  // Its own process group (as a terminal would run it): the stop below reaches the quickstart only,
  // which stops its worker, then its control plane.
  const proc = new BenchProcess(
    spawn(process.execPath, [join(DIST, 'apps/control-plane/src/quickstart.js')], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', QL_ADMIN_PORT: '0', QL_INGRESS_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  try {
    const registered = await proc.untilLine('worker registered', 180_000);
    const pidOf = (msg: string) =>
      pollUntil(
        msg,
        () => proc.lines.find((l) => l.msg === msg && typeof l.pid === 'number')?.pid as number | undefined,
        10_000,
      );
    const planePid = await pidOf('quickstart: control plane ready');
    const workerPid = await pidOf('quickstart: worker-1 started');
    await sleep(idleSeconds * 1000);
    return {
      planeMiB: rssMiB(planePid),
      workerMiB: rssMiB(workerPid),
      supervisorMiB: proc.rssMiB(),
      registeredMs: Date.parse(String(registered.time)) - proc.spawnedAtMs,
    };
  } finally {
    await proc.stop(30_000);
  }
}
