/**
 * Process-level memory and start-up (issue 9): the idle worker's RSS beside a bare `node` process,
 * under several V8 flag sets; the standalone control plane's idle RSS and time to `/readyz` beside a
 * bare Fastify hello-world started the same way; and what each part of the worker's module graph
 * costs. Every figure and its peer come from the same run.
 */
import { performance } from 'node:perf_hooks';
import { MACHINE_CLASSES, WORKER_NODE_FLAGS, workerNodeFlags } from '../apps/worker/src/node-flags';
import { CONTROL_PLANE_NODE_FLAGS } from '../apps/control-plane/src/node-flags';
import { BenchSession } from './dispatch';
import { median } from './lib/measure';
import {
  BenchDatabase,
  BenchPki,
  PlaneProcess,
  WORKER_MAIN,
  WORKER_UNBUNDLED,
  createBenchPki,
  createPlaneDatabase,
  startPlaneProcess,
} from './lib/plane';
import { BenchProcess, pollUntil, spawnNode } from './lib/processes';
import { ModuleCostRow, moduleCost } from './memory-modules';
import { QuickstartMemory, quickstartMemory } from './memory-quickstart';

/** V8 flag sets tried on the worker (each beside a bare `node` with the same flags). */
export const FLAG_SETS: readonly (readonly string[])[] = [
  [],
  ['--max-semi-space-size=1'],
  ['--optimize-for-size'],
  ['--jitless'],
  ['--lite-mode'],
  WORKER_NODE_FLAGS,
  ['--lite-mode', '--max-semi-space-size=1'],
  ['--lite-mode', '--max-semi-space-size=1', '--optimize-for-size'],
  ['--lite-mode', '--max-semi-space-size=1', '--max-old-space-size=64'],
];

/**
 * The worker's two entries (ADR 0049): every flag set runs the unbundled compiled entry, as the
 * earlier results did; the bundle bin/ql-worker starts runs under each machine class's flags.
 */
export const WORKER_ENTRIES = { unbundled: WORKER_UNBUNDLED, bundle: WORKER_MAIN } as const;
export type WorkerEntry = keyof typeof WORKER_ENTRIES;
const WORKER_RUNS: readonly { entry: WorkerEntry; flags: readonly string[] }[] = [
  ...FLAG_SETS.map((flags) => ({ entry: 'unbundled' as const, flags })),
  ...MACHINE_CLASSES.map((c) => ({ entry: 'bundle' as const, flags: workerNodeFlags(c) })),
];

/** ` (the small class)` after a flag set bin/ql-worker starts the worker with (ADR 0046), else nothing. */
function classLabel(flags: readonly string[]): string {
  const machineClass = MACHINE_CLASSES.find((c) => workerNodeFlags(c).join(' ') === flags.join(' '));
  return machineClass ? ` (the ${machineClass} class)` : '';
}

/** A process that does nothing and stays alive: the floor any Node process pays. */
const BARE_NODE = ['-e', 'setInterval(() => {}, 1 << 30)'];

export interface WorkerMemoryRow {
  /** Which file node ran: the compiled main.js or the bundle (WORKER_ENTRIES). */
  readonly entry: WorkerEntry;
  readonly flags: string;
  readonly workerMiB: number;
  /** A bare `node -e` with the same flags, alive for the same time. */
  readonly bareSameFlagsMiB: number;
  /** Worker RSS over the bare `node` without flags (the ratio; target ≤ 1.5). */
  readonly ratio: number;
  /** CPU the worker used during the idle window (heartbeats), ms. */
  readonly idleCpuMs: number;
  /** From spawn to its "worker registered" log line (start-up, TLS, first round trip). */
  readonly registeredMs: number;
}

/** One control plane (standalone, SQLite) under one V8 flag set: idle, then under heartbeat load. */
export interface PlaneFlagsRow {
  readonly flags: string;
  /** Whether these are the flags every launcher uses (apps/control-plane/src/node-flags.ts). */
  readonly launchers: boolean;
  readonly idleMiB: number;
  readonly readyMs: number;
  /** Median over the rounds of fenced heartbeats/s over mTLS (`loadSessions` closed loops). */
  readonly heartbeatsPerSecond: number;
  /** Median over the rounds of the plane's CPU (user + system) per 1,000 heartbeats, ms. */
  readonly cpuMsPer1k: number;
  /** Median over rounds of this plane's CPU per heartbeat / the no-flags plane's, same round. */
  readonly cpuVsNone: number;
  /** Every round's CPU ms per 1,000 heartbeats, in round order. */
  readonly cpuMsPer1kByRound: readonly number[];
  /** RSS right after the last load window. */
  readonly afterLoadMiB: number;
}

export interface PlaneMemoryResult {
  readonly planes: PlaneFlagsRow[];
  readonly fastifyMiB: number;
  readonly fastifyReadyMs: number;
  readonly loadSessions: number;
  readonly loadSeconds: number;
  readonly loadRounds: number;
}

export interface MemoryResult {
  readonly idleSeconds: number;
  readonly bareNodeMiB: number;
  readonly workers: WorkerMemoryRow[];
  readonly plane: PlaneMemoryResult;
  /** `npm start` on its first start: its control plane and its worker (bench/memory-quickstart.ts). */
  readonly quickstart: QuickstartMemory;
  readonly moduleCost: ModuleCostRow[];
  /** CommonJS packages the worker's module graph loads (Nest itself is ESM and not listed). */
  readonly workerPackages: Record<string, number>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One worker per flag set against one real control plane (SQLite), each beside a bare `node` with
 * the same flags, plus one bare `node` without flags; all idle together for `idleSeconds` after the
 * last worker registered, then every RSS is read at the same moment.
 */
async function workerMemory(idleSeconds: number, log: (l: string) => void) {
  const ids = WORKER_RUNS.map((_, i) => `mem-worker-${i + 1}`);
  const pki = await createBenchPki(ids);
  const db = await createPlaneDatabase('sqlite', '');
  const procs: BenchProcess[] = [];
  try {
    const plane = await startPlaneProcess(db, pki);
    procs.push(plane.process);
    const reference = spawnNode(BARE_NODE, {});
    procs.push(reference);
    const pairs = WORKER_RUNS.map(({ entry, flags }, i) => {
      const worker = spawnNode(
        [...flags, WORKER_ENTRIES[entry]],
        pki.workerEnv(ids[i]!, plane.ready.ingressUrl),
      );
      const bare = spawnNode([...flags, ...BARE_NODE], {});
      procs.push(worker, bare);
      return { entry, flags, worker, bare };
    });
    const registeredMs: number[] = [];
    for (const p of pairs) {
      // Eleven workers and eleven bare nodes start together: on a shared, busy machine this takes a while.
      await p.worker.untilLine('worker registered', 180_000);
      registeredMs.push(
        Date.parse(String(p.worker.lines.find((l) => l.msg === 'worker registered')!.time)) -
          p.worker.spawnedAtMs,
      );
    }
    log(`memory: ${pairs.length} workers registered; idle ${idleSeconds} s`);
    const cpuAtStart = pairs.map((p) => p.worker.cpuMs());
    await sleep(idleSeconds * 1000);
    const bareNodeMiB = reference.rssMiB();
    const workers: WorkerMemoryRow[] = pairs.map((p, i) => {
      const workerMiB = p.worker.rssMiB();
      return {
        entry: p.entry,
        idleCpuMs: p.worker.cpuMs() - cpuAtStart[i]!,
        registeredMs: registeredMs[i]!,
        flags: (p.flags.join(' ') || '(none)') + classLabel(p.flags),
        workerMiB,
        bareSameFlagsMiB: p.bare.rssMiB(),
        ratio: workerMiB / bareNodeMiB,
      };
    });
    return { bareNodeMiB, workers };
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
    await db.drop();
    pki.remove();
  }
}

/** How one control plane of the bench is started: its V8 flags, and environment beside the launchers'. */
export interface PlaneVariant {
  readonly flags: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** How the table names it. */
  readonly label: string;
}

/**
 * The control plane is measured as the launchers start it (`CONTROL_PLANE_NODE_FLAGS`,
 * `CONTROL_PLANE_ENV`), with glibc's default malloc arenas instead (`MALLOC_ARENA_MAX=0`), under two
 * larger young generations, and with no V8 flag (ADR 0024 weighs them: idle RSS against CPU per
 * heartbeat).
 */
const SEMI_SPACE_CANDIDATES = [
  ['--max-semi-space-size=1'],
  ['--max-semi-space-size=2'],
  ['--max-semi-space-size=4'],
];
export const PLANE_VARIANTS: readonly PlaneVariant[] = [
  { flags: CONTROL_PLANE_NODE_FLAGS, env: {}, label: CONTROL_PLANE_NODE_FLAGS.join(' ') },
  {
    flags: CONTROL_PLANE_NODE_FLAGS,
    env: { MALLOC_ARENA_MAX: '0' },
    label: `${CONTROL_PLANE_NODE_FLAGS.join(' ')}, MALLOC_ARENA_MAX=0 (glibc's default arenas)`,
  },
  ...SEMI_SPACE_CANDIDATES.filter((set) => set.join(' ') !== CONTROL_PLANE_NODE_FLAGS.join(' ')).map(
    (flags) => ({ flags, env: {}, label: flags.join(' ') }),
  ),
  { flags: [], env: {}, label: '(none)' },
];

export interface PlaneLoad {
  readonly sessions: number;
  readonly seconds: number;
  readonly rounds: number;
}

/** Worker ids the load phase registers on every plane (each plane has its own database). */
export const loadWorkerIds = (load: PlaneLoad) =>
  Array.from({ length: load.sessions }, (_, i) => `mem-load-${i + 1}`);

/**
 * The standalone control plane (SQLite), once per flag set, each from spawn to `/readyz` 200, beside a
 * Fastify hello-world with a `/readyz` route started the same way (its own process, polled the same
 * way); all idle together for `idleSeconds`, then their RSS is read. Then each plane in turn, rounds
 * alternated, carries `load.sessions` worker sessions heartbeating over mTLS in closed loops for
 * `load.seconds`: heartbeats/s and the plane's CPU per heartbeat are what the flags cost under load.
 */
async function planeMemory(idleSeconds: number, pki: BenchPki, load: PlaneLoad): Promise<PlaneMemoryResult> {
  const fastifyCode = [
    `const app = require(${JSON.stringify(require.resolve('fastify'))})();`,
    `app.get('/readyz', async () => ({ status: 'ok' }));`,
    `app.listen({ host: '127.0.0.1', port: 0 }).then(() => process.send(app.server.address().port));`,
  ].join('\n');
  const dbs: BenchDatabase[] = [];
  const procs: BenchProcess[] = [];
  const sessions: BenchSession[][] = [];
  try {
    const planes: PlaneProcess[] = [];
    for (const variant of PLANE_VARIANTS) {
      const db = await createPlaneDatabase('sqlite', '');
      dbs.push(db);
      const plane = await startPlaneProcess(db, pki, { ...UNLIMITED_INGRESS, ...variant.env }, variant.flags);
      procs.push(plane.process);
      planes.push(plane);
    }
    const fastify = spawnNode(['-e', fastifyCode], {}, true);
    procs.push(fastify);
    const fastifyReadyMs = await readyzOf(fastify);
    await sleep(idleSeconds * 1000);
    const idleMiB = planes.map((p) => p.process.rssMiB());
    const fastifyMiB = fastify.rssMiB();
    for (const plane of planes) {
      const own: BenchSession[] = [];
      sessions.push(own);
      for (const id of loadWorkerIds(load)) own.push(await BenchSession.register(pki, plane, id));
    }
    const samples = planes.map(() => ({ perSecond: [] as number[], cpuMsPer1k: [] as number[] }));
    for (let round = 0; round < load.rounds; round++) {
      for (let k = 0; k < planes.length; k++) {
        const i = (k + round) % planes.length;
        const sample = await heartbeatWindow(sessions[i]!, planes[i]!.process, load.seconds);
        samples[i]!.perSecond.push(sample.perSecond);
        samples[i]!.cpuMsPer1k.push(sample.cpuMsPer1k);
      }
    }
    const none = PLANE_VARIANTS.findIndex((v) => v.flags.length === 0);
    return {
      planes: planes.map((plane, i) => ({
        flags: PLANE_VARIANTS[i]!.label,
        launchers: i === 0,
        idleMiB: idleMiB[i]!,
        readyMs: plane.readyMs,
        heartbeatsPerSecond: median(samples[i]!.perSecond),
        cpuMsPer1k: median(samples[i]!.cpuMsPer1k),
        cpuVsNone: median(samples[i]!.cpuMsPer1k.map((c, round) => c / samples[none]!.cpuMsPer1k[round]!)),
        cpuMsPer1kByRound: samples[i]!.cpuMsPer1k,
        afterLoadMiB: plane.process.rssMiB(),
      })),
      fastifyMiB,
      fastifyReadyMs,
      loadSessions: load.sessions,
      loadSeconds: load.seconds,
      loadRounds: load.rounds,
    };
  } finally {
    await Promise.all(sessions.flat().map((s) => s.close()));
    await Promise.all(procs.map((p) => p.stop()));
    await Promise.all(dbs.map((db) => db.drop()));
  }
}

/**
 * The bench's heartbeats must not meet the ingress rate limit, and a plane's sessions must outlive the
 * other planes' registrations and load windows.
 */
const UNLIMITED_INGRESS = {
  QL_INGRESS_RATE_PER_SECOND: '100000',
  QL_INGRESS_RATE_BURST: '100000',
  QL_SESSION_LEASE_MS: '600000',
};

/** Every session heartbeats in its own closed loop for `seconds`; rate and the plane's CPU per 1,000. */
async function heartbeatWindow(sessions: readonly BenchSession[], plane: BenchProcess, seconds: number) {
  let count = 0;
  const cpuAtStart = plane.cpuMs();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(
    sessions.map(async (session) => {
      while (performance.now() < end) {
        await session.heartbeat();
        count++;
      }
    }),
  );
  const elapsedSeconds = (performance.now() - t0) / 1000;
  return { perSecond: count / elapsedSeconds, cpuMsPer1k: ((plane.cpuMs() - cpuAtStart) / count) * 1000 };
}

/** Time from spawn until the hello-world's `/readyz` answers 200 (it prints its port on IPC). */
async function readyzOf(proc: BenchProcess): Promise<number> {
  const port = await new Promise<number>((resolve, reject) => {
    proc.child.once('message', (m) => resolve(m as number));
    void proc.exited.then((code) =>
      reject(new Error(`hello-world exited ${code}: ${proc.output.join('\n')}`)),
    );
  });
  const url = `http://127.0.0.1:${port}/readyz`;
  await pollUntil(
    'hello-world /readyz',
    async () => ((await fetch(url)).status === 200 ? true : undefined),
    30_000,
  );
  return performance.now() - proc.startedAt;
}

export async function measureMemory(
  idleSeconds: number,
  load: PlaneLoad,
  log: (l: string) => void,
): Promise<MemoryResult> {
  const { rows: moduleRows, workerPackages } = await moduleCost();
  log('memory: module graph measured');
  const pki = await createBenchPki(loadWorkerIds(load));
  try {
    const plane = await planeMemory(idleSeconds, pki, load);
    log('memory: control plane measured');
    const workers = await workerMemory(idleSeconds, log);
    const quickstart = await quickstartMemory(idleSeconds);
    log('memory: quickstart measured');
    return {
      idleSeconds,
      bareNodeMiB: workers.bareNodeMiB,
      workers: workers.workers,
      plane,
      quickstart,
      moduleCost: moduleRows,
      workerPackages,
    };
  } finally {
    pki.remove();
  }
}
