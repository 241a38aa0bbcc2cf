/**
 * `npm run bench -- plane-cost` (issue 17, item 3): what the control plane spends per run, broken
 * down by ingress route and by layer, beside its ceiling — a Node `https` hello-world with the same
 * certificates answering the same number of mTLS requests over the same number of connections.
 *
 * 1. A control plane (`cluster-control` on PostgreSQL, the launchers' flags) and W real worker
 *    processes × S slots drain a backlog of `sh -c true` runs (bench/worker-drain.ts). Its /metrics
 *    before and after give each ingress route's calls per run and mean server time per call
 *    (`ql_http_request_duration_seconds`); /proc gives its CPU per run.
 * 2. The same drain on a fresh database with the plane under `--cpu-prof`: the busy samples of the
 *    drain window split by layer (bench/plane-cost-profile.ts), applied to the CPU of step 1.
 * 3. The hello-world answers as many requests per run as the plane served, W connections in closed
 *    loops; its CPU per request is the floor of TLS + HTTP in Node with nothing behind it.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CONTROL_PLANE_NODE_FLAGS } from '../apps/control-plane/src/node-flags';
import { noopTask } from './dispatch';
import { post, startHello } from './heartbeat-mtls';
import { envNumber, median } from './lib/measure';
import {
  BenchDatabase,
  BenchPki,
  PlaneProcess,
  createBenchPki,
  createPlaneDatabase,
  startPlaneProcess,
} from './lib/plane';
import { redactUrl } from './lib/postgres-admin';
import { cpuMs } from './lib/processes';
import { Align, machineInfo, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';
import { LAYERS, Layer, ProfileSplit, splitProfile } from './plane-cost-profile';
import { workerProcessDrain } from './worker-drain';

interface RouteStat {
  readonly count: number;
  readonly sumSeconds: number;
}

const HISTOGRAM = /^ql_http_request_duration_seconds_(sum|count)\{([^}]*)\} ([0-9.e+-]+)$/;

/** Ingress answers by route pattern (all methods and statuses together) from a /metrics text. */
export function ingressRoutes(metrics: string): Map<string, RouteStat> {
  const routes = new Map<string, { count: number; sumSeconds: number }>();
  for (const line of metrics.split('\n')) {
    const m = HISTOGRAM.exec(line);
    if (!m || !m[2]!.includes('listener="ingress"')) continue;
    const route = /route="([^"]*)"/.exec(m[2]!)?.[1] ?? 'unmatched';
    const stat = routes.get(route) ?? { count: 0, sumSeconds: 0 };
    if (m[1] === 'count') stat.count += Number(m[3]);
    else stat.sumSeconds += Number(m[3]);
    routes.set(route, stat);
  }
  return routes;
}

async function scrape(plane: PlaneProcess): Promise<Map<string, RouteStat>> {
  const res = await fetch(`${plane.ready.adminUrl}/metrics`, {
    headers: { authorization: `Bearer ${plane.adminToken}` },
  });
  if (res.status !== 200) throw new Error(`GET /metrics: ${res.status}`);
  return ingressRoutes(await res.text());
}

/** `/ingress/v1/workers/:workerId/sessions/:sessionId/starting` → `starting`. */
const shortRoute = (route: string) => route.split('/').at(-1)!.replace(/^:.*/, route);

interface DrainFigures {
  readonly runs: number;
  readonly runsPerSecond: number;
  readonly planeCpuMsPerRun: number;
  readonly routes: Record<string, { callsPerRun: number; serverMsPerCall: number }>;
}

async function drain(
  plane: PlaneProcess,
  pki: BenchPki,
  db: BenchDatabase,
  ids: readonly string[],
  runs: number,
  warmup: number,
  slots: number,
): Promise<DrainFigures> {
  const before = await scrape(plane);
  const queue = async (name: string, n: number) => {
    const task = await noopTask(plane, name);
    for (let i = 0; i < n; i++) await task.trigger();
    return task.taskId;
  };
  const sample = await workerProcessDrain(
    plane,
    pki,
    db,
    ids,
    runs,
    warmup,
    queue,
    { QL_WORKER_MAX_CONCURRENT_RUNS: String(slots) },
    { plane: () => cpuMs(plane.process.pid) },
  );
  const after = await scrape(plane);
  const routes: DrainFigures['routes'] = {};
  for (const [route, stat] of after) {
    const count = stat.count - (before.get(route)?.count ?? 0);
    const sum = stat.sumSeconds - (before.get(route)?.sumSeconds ?? 0);
    if (count > 0)
      routes[shortRoute(route)] = {
        callsPerRun: count / (runs + warmup),
        serverMsPerCall: (1000 * sum) / count,
      };
  }
  return {
    runs,
    runsPerSecond: sample.runsPerSecond,
    planeCpuMsPerRun: sample.cpuMsPerRun?.plane ?? NaN,
    routes,
  };
}

/** The hello-world's CPU per request: `requests` POSTs over the workers' connections, closed loops. */
async function helloCpuPerRequest(pki: BenchPki, ids: readonly string[], requests: number): Promise<number> {
  const hello = await startHello(pki, ids);
  try {
    const body = { expectedVersion: 1, leaseToken: 'x'.repeat(43), leaseGeneration: 1, leaseVersion: 3 };
    const warm = async (w: (typeof hello.workers)[number], n: number) => {
      for (let i = 0; i < n; i++) await post(hello.url, w.agent, '/hello', body);
    };
    await Promise.all(hello.workers.map((w) => warm(w, 20)));
    const cpu0 = cpuMs(hello.process.pid);
    const each = Math.ceil(requests / hello.workers.length);
    await Promise.all(hello.workers.map((w) => warm(w, each)));
    return (cpuMs(hello.process.pid) - cpu0) / (each * hello.workers.length);
  } finally {
    for (const w of hello.workers) w.agent.destroy();
    await hello.stop();
  }
}

export async function planeCostMain(resultsDir: string): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const runs = Math.floor(envNumber('QL_BENCH_PLANE_COST_RUNS', 600, 10));
  const warmup = Math.floor(envNumber('QL_BENCH_PLANE_COST_WARMUP', 50, 1));
  const workers = Math.floor(envNumber('QL_BENCH_PLANE_COST_WORKERS', 4, 1));
  const slots = Math.floor(envNumber('QL_BENCH_PLANE_COST_SLOTS', 1, 1));
  const rounds = Math.floor(envNumber('QL_BENCH_ROUNDS', 3, 1));
  const intervalUs = Math.floor(envNumber('QL_BENCH_PLANE_COST_PROFILE_US', 250, 50));
  const pgUrl = process.env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const ids = Array.from({ length: workers }, (_, i) => `worker-${i + 1}`);
  console.log(
    `plane-cost bench: ${workers}×${slots}, ${runs} runs per drain after ${warmup}, ${rounds} rounds; ` +
      `PostgreSQL ${redactUrl(pgUrl)}; node ${machine.node}, ${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart}`,
  );
  const pki = await createBenchPki(ids);
  const profileDir = mkdtempSync(join(tmpdir(), 'ql-bench-plane-prof-'));
  const drains: DrainFigures[] = [];
  const hello: number[] = [];
  let split: ProfileSplit | undefined;
  try {
    for (let round = 0; round < rounds; round++) {
      const db = await createPlaneDatabase('postgres', pgUrl);
      try {
        const plane = await startPlaneProcess(db, pki);
        try {
          drains.push(await drain(plane, pki, db, ids, runs, warmup, slots));
        } finally {
          await plane.stop();
        }
      } finally {
        await db.drop();
      }
      const d = drains.at(-1)!;
      const calls = Object.values(d.routes).reduce((sum, r) => sum + r.callsPerRun, 0);
      hello.push(await helloCpuPerRequest(pki, ids, Math.round(calls * runs)));
      console.log(
        `  round ${round + 1}: ${d.runsPerSecond.toFixed(1)} runs/s, plane ${d.planeCpuMsPerRun.toFixed(2)} ms CPU/run ` +
          `over ${calls.toFixed(2)} ingress calls/run; hello-world ${hello.at(-1)!.toFixed(3)} ms CPU/request`,
      );
    }
    // One profiled drain (the profiler costs CPU itself: its shares split the unprofiled CPU above).
    const db = await createPlaneDatabase('postgres', pgUrl);
    try {
      const flags = [
        ...CONTROL_PLANE_NODE_FLAGS,
        '--cpu-prof',
        `--cpu-prof-dir=${profileDir}`,
        `--cpu-prof-interval=${intervalUs}`,
      ];
      const plane = await startPlaneProcess(db, pki, {}, flags);
      try {
        await drain(plane, pki, db, ids, runs, warmup, slots);
      } finally {
        await plane.stop();
      }
    } finally {
      await db.drop();
    }
    const file = readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error('the profiled control plane wrote no .cpuprofile');
    split = splitProfile(join(profileDir, file));
  } finally {
    rmSync(profileDir, { recursive: true, force: true });
    await pki.remove();
  }
  report(
    resultsDir,
    started,
    machine,
    { runs, warmup, workers, slots, rounds, intervalUs },
    drains,
    hello,
    split,
  );
}

function report(
  resultsDir: string,
  started: Date,
  machine: ReturnType<typeof machineInfo>,
  config: Record<string, number>,
  drains: readonly DrainFigures[],
  hello: readonly number[],
  split: ProfileSplit,
): void {
  const cpuPerRun = median(drains.map((d) => d.planeCpuMsPerRun));
  const routeNames = [...new Set(drains.flatMap((d) => Object.keys(d.routes)))];
  const perRoute = (name: string, key: 'callsPerRun' | 'serverMsPerCall') =>
    median(drains.map((d) => d.routes[name]?.[key] ?? 0));
  const callsPerRun = routeNames.reduce((sum, r) => sum + perRoute(r, 'callsPerRun'), 0);
  const helloMs = median(hello);
  const perCall = cpuPerRun / callsPerRun;
  const routeRows = routeNames
    .map((r) => [r, perRoute(r, 'callsPerRun'), perRoute(r, 'serverMsPerCall')] as const)
    .sort((a, b) => b[1] - a[1])
    .map(([r, calls, ms]) => [
      r,
      calls.toFixed(2),
      ms.toFixed(2),
      ((100 * calls) / callsPerRun).toFixed(0) + ' %',
    ]);
  const routeHeader = ['ingress route', 'calls per run', 'server ms per call (mean)', 'share of calls'];
  const routeAlign: Align[] = ['left', 'right', 'right', 'right'];
  const costRows = [
    ['control plane CPU per run (ms)', cpuPerRun.toFixed(2), '', ''],
    ['ingress calls per run', callsPerRun.toFixed(2), '', ''],
    [
      'control plane CPU per ingress call (ms)',
      perCall.toFixed(3),
      helloMs.toFixed(3),
      `${(perCall / helloMs).toFixed(2)} ×`,
    ],
  ];
  const costHeader = ['figure', 'ours', 'ceiling: https hello-world, same mTLS', 'ours ÷ ceiling'];
  const costAlign: Align[] = ['left', 'right', 'right', 'right'];
  const layerRows = LAYERS.map((l: Layer) => [
    l,
    `${(100 * split.share[l]).toFixed(1)} %`,
    (split.share[l] * cpuPerRun).toFixed(2),
    ((split.share[l] * cpuPerRun) / callsPerRun).toFixed(3),
  ]);
  const layerHeader = [
    'layer (self time of the sampled frame)',
    'share of busy samples',
    'ms per run',
    'ms per call',
  ];
  const layerAlign: Align[] = ['left', 'right', 'right', 'right'];
  console.log(textTable(routeHeader, routeRows, routeAlign));
  console.log(textTable(costHeader, costRows, costAlign));
  console.log(textTable(layerHeader, layerRows, layerAlign));
  writeResults(resultsDir, 'plane-cost', started, { machine, config, drains, hello, split }, [
    `# The control plane's cost per run, by route and by layer (issue 17, item 3)`,
    '',
    `Run ${started.toISOString()} — node ${machine.node}, ${machine.cpuCount} CPUs, 1-min load at start ${machine.loadAvgAtStart}.`,
    '',
    `A control plane (\`cluster-control\` on PostgreSQL, the launchers' flags, its own process) and ${config.workers} ` +
      `real worker processes × ${config.slots} slot(s) drain ${config.runs} runs of a shell task \`true\` after ` +
      `${config.warmup}; medians of ${config.rounds} rounds, each on a fresh database. Routes and server time from ` +
      'its `/metrics` (`ql_http_request_duration_seconds`, before and after, warm-up runs included); CPU per run from ' +
      '/proc over the counted runs. The ceiling: a Node `https` hello-world with the same certificates (client ' +
      'certificates required, TLS 1.3) answering as many requests per run as the plane served, over the same ' +
      'number of keep-alive connections in closed loops, in the same round.',
    '',
    markdownTable(routeHeader, routeRows, routeAlign),
    '',
    markdownTable(costHeader, costRows, costAlign),
    '',
    `By layer: one more drain with the plane under \`--cpu-prof\` (every ${config.intervalUs} µs); the busy ` +
      `samples between the first and the last inside an activation handler (${split.windowMs.toFixed(0)} ms, ` +
      `${split.busyMs.toFixed(0)} ms busy) split by the frame each was taken in, and the shares applied to the ` +
      'unprofiled CPU per run above. "Socket writes" is wall time inside the write call (TLS encryption and the ' +
      'syscall, which on loopback also delivers to the reader and may be preempted by it): an upper bound of ' +
      'its CPU, so the other shares are lower bounds.',
    '',
    markdownTable(layerHeader, layerRows, layerAlign),
    '',
  ]);
}
