/** The `memory` group of `npm run bench`: prints the tables and writes memory-<time>.json + latest-memory.md. */
import { WORKER_NODE_FLAGS } from '../apps/worker/src/node-flags';
import { FLAG_SETS, MemoryResult, WORKER_ENTRIES, WorkerMemoryRow, measureMemory } from './memory';
import { envNumber } from './lib/measure';
import { Align, machineInfo, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';

/** Issue 9: the idle worker at most 1.5 × a bare `node` process. */
export const WORKER_RSS_TARGET = 1.5;
/** Issue 10: the standalone control plane at idle. */
export const PLANE_RSS_TARGET_MIB = 100;

const mib = (n: number) => n.toFixed(1);

export async function memoryMain(resultsDir: string): Promise<MemoryResult> {
  const started = new Date();
  const machine = machineInfo(started);
  const idleSeconds = envNumber('QL_BENCH_IDLE_SECONDS', 60, 1);
  console.log(
    `memory bench: idle ${idleSeconds} s, ${FLAG_SETS.length} worker flag sets; node ${machine.node}, ` +
      `${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart}`,
  );
  const load = {
    sessions: Math.floor(envNumber('QL_BENCH_LOAD_SESSIONS', 32, 1)),
    seconds: envNumber('QL_BENCH_LOAD_SECONDS', 5, 1),
    rounds: Math.floor(envNumber('QL_BENCH_LOAD_ROUNDS', 3, 1)),
  };
  const result = await measureMemory(idleSeconds, load, (line) => console.log(line));

  const workerHeader = [
    'entry',
    'V8 flags',
    'worker RSS MiB',
    'bare node same flags MiB',
    'worker / bare node',
    'target',
    'result',
    'spawn → registered ms',
    'idle CPU ms',
  ];
  const workerAlign: Align[] = ['left', 'left', 'right', 'right', 'right', 'right', 'left', 'right', 'right'];
  const workerRows = result.workers.map((w) => [
    w.entry,
    w.flags,
    mib(w.workerMiB),
    mib(w.bareSameFlagsMiB),
    `${w.ratio.toFixed(2)} ×`,
    `≤ ${WORKER_RSS_TARGET} ×`,
    w.ratio <= WORKER_RSS_TARGET ? 'pass' : 'FAIL',
    w.registeredMs.toFixed(0),
    w.idleCpuMs.toFixed(0),
  ]);
  const p = result.plane;
  const planeHeader = [
    'process',
    `RSS after ${idleSeconds} s idle MiB`,
    'target',
    'result',
    'spawn → /readyz 200 ms',
    'heartbeats/s under load',
    'CPU ms / 1,000 heartbeats',
    'CPU / none, paired by round',
    'RSS after load MiB',
  ];
  const planeAlign: Align[] = ['left', 'right', 'right', 'left', 'right', 'right', 'right', 'right', 'right'];
  const planeRows = [
    ...p.planes.map((row) => [
      `control plane (standalone, SQLite), ${row.flags}${row.launchers ? ' (the launchers’)' : ''}`,
      mib(row.idleMiB),
      `≤ ${PLANE_RSS_TARGET_MIB} MiB`,
      row.idleMiB <= PLANE_RSS_TARGET_MIB ? 'pass' : 'FAIL',
      row.readyMs.toFixed(0),
      row.heartbeatsPerSecond.toFixed(0),
      row.cpuMsPer1k.toFixed(0),
      `${row.cpuVsNone.toFixed(2)} ×`,
      mib(row.afterLoadMiB),
    ]),
    ['Fastify hello-world (peer)', mib(p.fastifyMiB), '', '', p.fastifyReadyMs.toFixed(0), '', '', '', ''],
  ];
  const [launchers, bare] = [p.planes.find((r) => r.launchers)!, p.planes.find((r) => r.flags === '(none)')!];
  const planeLine =
    `the launchers' flags, beside none: idle RSS ${(launchers.idleMiB / bare.idleMiB).toFixed(2)} ×, ` +
    `heartbeats/s ${(launchers.heartbeatsPerSecond / bare.heartbeatsPerSecond).toFixed(2)} ×, ` +
    `CPU per heartbeat ${(launchers.cpuMsPer1k / bare.cpuMsPer1k).toFixed(2)} × (paired by round ${launchers.cpuVsNone.toFixed(2)} ×); ` +
    `idle RSS / target ${(launchers.idleMiB / PLANE_RSS_TARGET_MIB).toFixed(2)}, / Fastify hello-world ` +
    `${(launchers.idleMiB / p.fastifyMiB).toFixed(2)} ×`;
  const quickstartHeader = ['process', `RSS after ${idleSeconds} s idle MiB`, 'target', 'result'];
  const quickstartAlign: Align[] = ['left', 'right', 'right', 'left'];
  const quickstartRows = (['first', 'second'] as const).flatMap((which) => {
    const q = result.quickstart[which];
    const workerRatio = q.workerMiB / result.bareNodeMiB;
    const start = which === 'first' ? 'first start: it made its database and dev PKI' : 'second start';
    return [
      [
        `control plane (standalone, SQLite), ${start}`,
        mib(q.planeMiB),
        `≤ ${PLANE_RSS_TARGET_MIB} MiB`,
        q.planeMiB <= PLANE_RSS_TARGET_MIB ? 'pass' : 'FAIL',
      ],
      [
        `worker-1, ${which} start (${workerRatio.toFixed(2)} × bare node)`,
        mib(q.workerMiB),
        `≤ ${WORKER_RSS_TARGET} ×`,
        workerRatio <= WORKER_RSS_TARGET ? 'pass' : 'FAIL',
      ],
      [`the quickstart process (supervisor), ${which} start`, mib(q.supervisorMiB), '', ''],
    ];
  });
  const moduleHeader = ['required (cumulative, fresh node, after gc)', 'RSS MiB', 'heap used MiB'];
  const moduleAlign: Align[] = ['left', 'right', 'right'];
  const moduleRows = result.moduleCost.map((m) => [m.step, mib(m.rssMiB), mib(m.heapUsedMiB)]);
  const packages = Object.entries(result.workerPackages)
    .sort((a, b) => b[1] - a[1])
    .map(([name, files]) => `${name} (${files})`)
    .join(', ');
  const packagesLine = `CommonJS packages in the worker's module graph (files): ${packages}`;
  const bareLine = `bare \`node -e\` without flags, same run, same idle time: ${mib(result.bareNodeMiB)} MiB`;
  const bundleLine = bundleVsUnbundled(result.workers);

  console.log('');
  console.log(textTable(workerHeader, workerRows, workerAlign));
  console.log(bareLine);
  console.log(bundleLine);
  console.log('');
  console.log(textTable(planeHeader, planeRows, planeAlign));
  console.log(planeLine);
  console.log('');
  console.log(textTable(quickstartHeader, quickstartRows, quickstartAlign));
  console.log('');
  console.log(textTable(moduleHeader, moduleRows, moduleAlign));
  console.log(packagesLine);

  writeResults(resultsDir, 'memory', started, { benchmark: 'memory', machine, result }, [
    '# Idle memory and start-up: worker, control plane',
    '',
    `Run ${machine.date} — node ${machine.node}, ${machine.platform}, ${machine.cpuCount} × ${machine.cpuModel}, ` +
      `${machine.totalMemMiB} MiB, 1-min load at start ${machine.loadAvgAtStart}. Idle time ${idleSeconds} s.`,
    '',
    '## Idle worker RSS beside a bare `node` process',
    '',
    'One real worker process per row, registered and heartbeating over mTLS to one real control plane: the ' +
      `compiled entry unbundled (\`${relativeToDist(WORKER_ENTRIES.unbundled)}\`) under each flag set, and the bundle ` +
      `bin/ql-worker starts (\`${relativeToDist(WORKER_ENTRIES.bundle)}\`, ADR 0049) under each machine class's flags; ` +
      'each beside a bare `node -e` with the same flags; all idle in the ' +
      `same ${idleSeconds} s window, RSS read from /proc at the same moment. Ratio: worker / bare \`node\` without flags.`,
    '',
    markdownTable(workerHeader, workerRows, workerAlign),
    '',
    bareLine,
    '',
    bundleLine,
    '',
    '## Standalone control plane: idle RSS and start-up',
    '',
    "One control plane per variant (V8 flags; every plane has the launchers' environment, " +
      '`MALLOC_ARENA_MAX=2`, unless its row says otherwise) and the hello-world, each its own process, polled on `GET /readyz` ' +
      `every 5 ms from spawn (build excluded); then idle together for ${idleSeconds} s and their RSS read. ` +
      `Then each plane in turn (${p.loadRounds} rounds, order rotated) carries ${p.loadSessions} worker sessions ` +
      `heartbeating over mTLS in closed loops for ${p.loadSeconds} s (fenced heartbeats, the bench's client in ` +
      "this process); medians of the rounds, and of each round's ratio to the no-flag plane's CPU.",
    '',
    markdownTable(planeHeader, planeRows, planeAlign),
    '',
    planeLine,
    '',
    '## The quickstart (`npm start`): first and second start',
    '',
    '`dist/apps/control-plane/src/quickstart.js` in a fresh folder (its control plane makes the SQLite file ' +
      'and the dev PKI, then it starts `worker-1`), ports picked by the kernel; idle for the same ' +
      `${idleSeconds} s after the worker registered, then RSS from /proc; stopped and started again in the ` +
      'same folder. The worker ratio is over the bare `node` of the worker part.',
    '',
    markdownTable(quickstartHeader, quickstartRows, quickstartAlign),
    '',
    '## What the worker loads',
    '',
    markdownTable(moduleHeader, moduleRows, moduleAlign),
    '',
    packagesLine,
    '',
  ]);
  return result;
}

/** `dist/…` of a path under the build. */
function relativeToDist(path: string): string {
  return path.slice(path.lastIndexOf('/dist/') + 1);
}

/** The bundle beside the unbundled entry under the launchers' (small class) flags, same run. */
export function bundleVsUnbundled(workers: readonly WorkerMemoryRow[]): string {
  const flags = WORKER_NODE_FLAGS.join(' ');
  const of = (entry: WorkerMemoryRow['entry']) =>
    workers.find((w) => w.entry === entry && w.flags.startsWith(`${flags} (`));
  const [bundle, unbundled] = [of('bundle'), of('unbundled')];
  if (!bundle || !unbundled) return '';
  return (
    `under ${flags}: the bundle ${mib(bundle.workerMiB)} MiB (${bundle.ratio.toFixed(2)} ×), unbundled ` +
    `${mib(unbundled.workerMiB)} MiB (${unbundled.ratio.toFixed(2)} ×): ${mib(bundle.workerMiB - unbundled.workerMiB)} MiB; ` +
    `spawn → registered ${bundle.registeredMs.toFixed(0)} ms beside ${unbundled.registeredMs.toFixed(0)} ms`
  );
}
