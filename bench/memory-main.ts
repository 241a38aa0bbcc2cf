/** The `memory` group of `npm run bench`: prints the tables and writes memory-<time>.json + latest-memory.md. */
import { FLAG_SETS, MemoryResult, measureMemory } from './memory';
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
  const result = await measureMemory(idleSeconds, (line) => console.log(line));

  const workerHeader = [
    'V8 flags',
    'worker RSS MiB',
    'bare node same flags MiB',
    'worker / bare node',
    'target',
    'result',
  ];
  const workerAlign: Align[] = ['left', 'right', 'right', 'right', 'right', 'left'];
  const workerRows = result.workers.map((w) => [
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
  const planeHeader = ['process', `RSS after ${idleSeconds} s MiB`, 'spawn → /readyz 200 ms', 'target'];
  const planeAlign: Align[] = ['left', 'right', 'right', 'left'];
  const planeRows = [
    [
      'control plane (standalone, SQLite)',
      mib(p.planeMiB),
      p.planeReadyMs.toFixed(0),
      `RSS ≤ ${PLANE_RSS_TARGET_MIB} MiB: ${p.planeMiB <= PLANE_RSS_TARGET_MIB ? 'pass' : 'FAIL'}`,
    ],
    ['Fastify hello-world (ceiling)', mib(p.fastifyMiB), p.fastifyReadyMs.toFixed(0), ''],
  ];
  const moduleHeader = ['required (cumulative, fresh node, after gc)', 'RSS MiB', 'heap used MiB'];
  const moduleAlign: Align[] = ['left', 'right', 'right'];
  const moduleRows = result.moduleCost.map((m) => [m.step, mib(m.rssMiB), mib(m.heapUsedMiB)]);
  const packages = Object.entries(result.workerPackages)
    .sort((a, b) => b[1] - a[1])
    .map(([name, files]) => `${name} (${files})`)
    .join(', ');
  const packagesLine = `CommonJS packages in the worker's module graph (files): ${packages}`;
  const bareLine = `bare \`node -e\` without flags, same run, same idle time: ${mib(result.bareNodeMiB)} MiB`;

  console.log('');
  console.log(textTable(workerHeader, workerRows, workerAlign));
  console.log(bareLine);
  console.log('');
  console.log(textTable(planeHeader, planeRows, planeAlign));
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
    'One real worker process per flag set (`dist/apps/worker/src/main.js`, registered and heartbeating ' +
      'over mTLS to one real control plane), each beside a bare `node -e` with the same flags; all idle in the ' +
      `same ${idleSeconds} s window, RSS read from /proc at the same moment. Ratio: worker / bare \`node\` without flags.`,
    '',
    markdownTable(workerHeader, workerRows, workerAlign),
    '',
    bareLine,
    '',
    '## Standalone control plane: idle RSS and start-up',
    '',
    'Both started as their own process and polled on `GET /readyz` every 5 ms from spawn (build excluded); ' +
      `then idle together for ${idleSeconds} s.`,
    '',
    markdownTable(planeHeader, planeRows, planeAlign),
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
