/**
 * `npm run bench -- worker-cost` (ADR 0023): what one no-op run costs the worker process itself. One
 * real worker process (`dist/apps/worker/src/main.js`, the launchers' V8 flags, one slot) drains
 * `QL_BENCH_COST_RUNS` no-op runs (after `QL_BENCH_COST_WARMUP`) from a real control plane (SQLite,
 * its own process, mTLS). Per counted run: the worker's CPU (utime + stime of /proc/<pid>/stat), its
 * reaped children's CPU (cutime + cstime: the `sh -c true` of each run) separately, and — in a second
 * pass of its own, since tracing slows the process — the worker's syscalls (`strace -c` attached to
 * every thread of the worker, not to its children). Beside it, in the same run and interleaved round
 * by round: the same drain by the build in `QL_BENCH_COST_BASELINE` (a `dist/` built from the commit
 * before a change: the peer), and a floor — a bare `node` that spawns `sh -c true` in its own process
 * group and waits for it, as many times, with the same flags.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { MACHINE_CLASSES, WORKER_NODE_FLAGS, workerNodeFlags } from '../apps/worker/src/node-flags';
import { noopTask } from './dispatch';
import { envNumber, median } from './lib/measure';
import {
  BenchPki,
  PlaneProcess,
  WORKER_MAIN,
  createBenchPki,
  createPlaneDatabase,
  startPlaneProcess,
} from './lib/plane';
import { BenchProcess, peakRssMiB, pollUntil, rssMiB, spawnNode } from './lib/processes';
import { ownCpuMs, readProcStat, ticksToMs } from './lib/proc-cpu';
import { Align, machineInfo, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';

/** CPU ms of a live process and of its reaped children (bench/lib/proc-cpu.ts reads /proc/<pid>/stat). */
function procCpu(pid: number): { self: number; children: number } {
  const stat = readProcStat(pid);
  return { self: ownCpuMs(stat), children: ticksToMs(stat.cutime + stat.cstime) };
}

interface Variant {
  readonly name: string;
  readonly main: string;
  /** The V8 flags its node runs with (a machine class's, apps/worker/src/node-flags.ts). */
  readonly flags: readonly string[];
}

export interface CostSample {
  readonly variant: string;
  readonly runs: number;
  readonly cpuMsPerRun: number;
  readonly childrenCpuMsPerRun: number;
  readonly seconds: number;
  /** The worker's resident set right after the drain, and the largest it had (VmRSS, VmHWM), MiB. */
  readonly rssMiB: number;
  readonly peakRssMiB: number;
}

export interface SyscallSample {
  readonly variant: string;
  readonly runs: number;
  /** Calls per counted run, by syscall name (every syscall strace saw). */
  readonly perRun: Record<string, number>;
}

type Queue = () => Promise<{ first: string; warm: string; last: string }>;

async function runStatus(plane: PlaneProcess, runId: string): Promise<string> {
  const res = await plane.admin<{ status: string }>('GET', `/api/v1/runs/${runId}`);
  if (res.status !== 200) throw new Error(`run ${runId}: ${res.status}`);
  return res.body.status;
}

async function untilTerminal(plane: PlaneProcess, runId: string, worker: BenchProcess): Promise<void> {
  await pollUntil(
    `run ${runId} terminal`,
    async () => {
      if (worker.child.exitCode !== null) throw new Error(`worker exited:\n${worker.output.join('\n')}`);
      const status = await runStatus(plane, runId);
      if (['queued', 'dispatching', 'running', 'retry_wait'].includes(status)) return undefined;
      if (status !== 'succeeded') throw new Error(`run ${runId} ended ${status}`);
      return true;
    },
    600_000,
    20,
  );
}

/** strace -c on every thread of `pid` (not its children) until `stop` resolves; counts by syscall. */
async function traceThreads(pid: number, stop: () => Promise<void>): Promise<Record<string, number>> {
  const tids = readdirSync(`/proc/${pid}/task`);
  const { spawn } = await import('node:child_process');
  const tracer = spawn('strace', ['-c', '-U', 'name,calls', ...tids.flatMap((t) => ['-p', t])], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let report = '';
  tracer.stderr.on('data', (c: Buffer) => (report += c.toString('utf8')));
  const exited = new Promise<void>((resolve) => tracer.on('exit', () => resolve()));
  await pollUntil('strace attached', () => (/attached/.test(report) ? true : undefined), 10_000, 10);
  try {
    await stop();
  } finally {
    tracer.kill('SIGINT');
    await exited;
  }
  const counts: Record<string, number> = {};
  for (const line of report.split('\n')) {
    const m = /^\s*([a-z0-9_]+)\s+(\d+)\s*$/.exec(line);
    if (m && m[1] !== 'total') counts[m[1]!] = Number(m[2]);
  }
  return counts;
}

async function drainOnce(
  plane: PlaneProcess,
  pki: BenchPki,
  variant: Variant,
  queue: Queue,
  runs: number,
  trace: boolean,
): Promise<CostSample | SyscallSample> {
  const ids = await queue();
  const extra = (process.env.QL_BENCH_COST_NODE_FLAGS ?? '').split(' ').filter(Boolean);
  const worker = spawnNode([...variant.flags, ...extra, variant.main], {
    ...pki.workerEnv('cost-w1', plane.ready.ingressUrl),
    QL_WORKER_REQUEST_TIMEOUT_MS: '30000',
    QL_WORKER_STOP_BUDGET_MS: '40000',
  });
  try {
    await untilTerminal(plane, ids.warm, worker);
    if (trace) {
      const counts = await traceThreads(worker.pid, () => untilTerminal(plane, ids.last, worker));
      const perRun = Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, v / runs]));
      return { variant: variant.name, runs, perRun };
    }
    const before = procCpu(worker.pid);
    const t0 = performance.now();
    await untilTerminal(plane, ids.last, worker);
    const after = procCpu(worker.pid);
    return {
      variant: variant.name,
      runs,
      cpuMsPerRun: (after.self - before.self) / runs,
      childrenCpuMsPerRun: (after.children - before.children) / runs,
      seconds: (performance.now() - t0) / 1000,
      rssMiB: rssMiB(worker.pid),
      peakRssMiB: peakRssMiB(worker.pid),
    };
  } finally {
    await worker.stop();
  }
}

/** The floor: a bare node spawning `sh -c true` detached and awaiting its exit, `runs` times. */
function floorSample(runs: number): CostSample {
  const code = `const {spawn}=require('node:child_process');let n=${runs};const t0=process.cpuUsage();
const one=()=>{if(!n--){const u=process.cpuUsage(t0);process.stdout.write(JSON.stringify(u));return;}
const c=spawn('/bin/sh',['-c','true'],{detached:true,stdio:['ignore','pipe','pipe']});c.on('close',one);};one();`;
  const started = performance.now();
  const res = spawnSync(process.execPath, [...WORKER_NODE_FLAGS, '-e', code], { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`floor: ${res.stderr}`);
  const usage = JSON.parse(res.stdout) as { user: number; system: number };
  return {
    variant: 'floor (bare node spawning sh -c true)',
    runs,
    cpuMsPerRun: (usage.user + usage.system) / 1000 / runs,
    childrenCpuMsPerRun: Number.NaN,
    seconds: (performance.now() - started) / 1000,
    rssMiB: Number.NaN,
    peakRssMiB: Number.NaN,
  };
}

const SYSCALLS_SHOWN = ['openat', 'read', 'write', 'fsync', 'fdatasync', 'rename', 'statx', 'close'];

export async function workerCostMain(resultsDir: string): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const runs = Math.floor(envNumber('QL_BENCH_COST_RUNS', 100, 1));
  const warmup = Math.floor(envNumber('QL_BENCH_COST_WARMUP', 10, 1));
  const rounds = Math.floor(envNumber('QL_BENCH_COST_ROUNDS', 3, 1));
  const baseline = process.env.QL_BENCH_COST_BASELINE;
  // `true` (a no-op) unless a command with output is asked for: its upload is the worker's JavaScript.
  const command = process.env.QL_BENCH_COST_COMMAND || 'true';
  // Both machine classes' flags (apps/worker/src/node-flags.ts): the same build, interleaved.
  const variants: Variant[] = MACHINE_CLASSES.map((c) => ({
    name: `this build, ${c}-machine flags`,
    main: WORKER_MAIN,
    flags: workerNodeFlags(c),
  }));
  if (baseline)
    variants.push({
      name: 'baseline',
      main: join(baseline, 'apps/worker/src/main.js'),
      flags: workerNodeFlags('small'),
    });
  const strace = spawnSync('strace', ['-V'], { encoding: 'utf8' }).status === 0;
  console.log(
    `worker-cost bench: ${runs} runs of \`${command}\` per drain (after ${warmup}), ${rounds} rounds, ` +
      `variants ${variants.map((v) => v.name).join(', ')}; strace ${strace ? 'yes' : 'no'}; ` +
      `node ${machine.node}, ${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart}`,
  );
  const pki = await createBenchPki(['cost-w1']);
  const db = await createPlaneDatabase('sqlite', '');
  const plane = await startPlaneProcess(db, pki, {
    QL_SESSION_LEASE_MS: '600000',
    QL_INGRESS_RATE_PER_SECOND: '100000',
    QL_INGRESS_RATE_BURST: '100000',
  });
  const samples: CostSample[] = [];
  const syscalls: SyscallSample[] = [];
  try {
    let n = 0;
    const queue: Queue = async () => {
      const { trigger } = await noopTask(plane, `cost ${n++}`, command);
      const ids: string[] = [];
      for (let i = 0; i < warmup + runs; i++) ids.push((await trigger()).runId);
      return { first: ids[0]!, warm: ids[warmup - 1]!, last: ids.at(-1)! };
    };
    for (let round = 0; round < rounds; round++) {
      // Alternate which variant goes first, so neither always gets the quieter moment.
      const order = round % 2 ? [...variants].reverse() : variants;
      for (const v of order) {
        const s = (await drainOnce(plane, pki, v, queue, runs, false)) as CostSample;
        console.log(
          `worker-cost: ${v.name} round ${round + 1}: ${s.cpuMsPerRun.toFixed(2)} ms/run, children ${s.childrenCpuMsPerRun.toFixed(2)}, ` +
            `RSS ${s.rssMiB.toFixed(1)} MiB (peak ${s.peakRssMiB.toFixed(1)})`,
        );
        samples.push(s);
      }
      samples.push(floorSample(runs));
    }
    if (strace) {
      for (const v of variants)
        syscalls.push((await drainOnce(plane, pki, v, queue, runs, true)) as SyscallSample);
    }
  } finally {
    await plane.stop();
    await db.drop();
    pki.remove();
  }

  const names = [...new Set(samples.map((s) => s.variant))];
  const med = (name: string, pick: (s: CostSample) => number) =>
    median(samples.filter((s) => s.variant === name).map(pick));
  const base = baseline ? med('baseline', (s) => s.cpuMsPerRun) : Number.NaN;
  const baseChildren = baseline ? med('baseline', (s) => s.childrenCpuMsPerRun) : Number.NaN;
  const cpuHeader = [
    'variant',
    'worker CPU ms/run',
    'vs baseline',
    'children CPU ms/run',
    'vs baseline',
    'worker RSS after drain MiB',
    'worker peak RSS MiB',
    'samples',
  ];
  const cpuAlign: Align[] = ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'left'];
  const fmt = (x: number) => (Number.isNaN(x) ? '–' : x.toFixed(2));
  const cpuRows = names.map((name) => {
    const cpu = med(name, (s) => s.cpuMsPerRun);
    const children = med(name, (s) => s.childrenCpuMsPerRun);
    return [
      name,
      fmt(cpu),
      fmt(cpu / base),
      fmt(children),
      fmt(children / baseChildren),
      fmt(med(name, (s) => s.rssMiB)),
      fmt(med(name, (s) => s.peakRssMiB)),
      samples
        .filter((s) => s.variant === name)
        .map((s) => s.cpuMsPerRun.toFixed(1))
        .join(', '),
    ];
  });
  const callNames = [
    ...SYSCALLS_SHOWN.filter((c) => syscalls.some((s) => s.perRun[c] !== undefined)),
    'all syscalls',
  ];
  const total = (s: SyscallSample) => Object.values(s.perRun).reduce((a, b) => a + b, 0);
  const callRows = syscalls.map((s) => [
    s.variant,
    ...callNames.map((c) => (c === 'all syscalls' ? total(s) : (s.perRun[c] ?? 0)).toFixed(1)),
  ]);
  const callHeader = ['variant (per run)', ...callNames];
  const callAlign: Align[] = callHeader.map((_, i) => (i ? 'right' : 'left'));
  console.log(textTable(cpuHeader, cpuRows, cpuAlign));
  if (callRows.length) console.log(textTable(callHeader, callRows, callAlign));
  const what = command === 'true' ? 'no-op runs' : `runs of \`${command}\``;
  writeResults(
    resultsDir,
    'worker-cost',
    started,
    { machine, runs, warmup, rounds, command, samples, syscalls },
    [
      `# Worker CPU and syscalls per ${command === 'true' ? 'no-op run' : 'run with output'} (ADR 0023, ADR 0046)`,
      '',
      `One worker process (one slot, SQLite control plane in its own process, mTLS) drains ${runs} ${what} ` +
        `after ${warmup}; medians of ${rounds} rounds, variants interleaved. Worker CPU = utime + stime of the ` +
        `worker, children = cutime + cstime (the runs' commands and the reaper), from /proc; RSS = the worker's ` +
        `VmRSS right after the drain and its VmHWM (peak since start), medians. The floor is a ` +
        `bare node spawning \`sh -c true\` detached and awaiting it. Node ${machine.node}, ` +
        `${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart} at start.`,
      '',
      markdownTable(cpuHeader, cpuRows, cpuAlign),
      '',
      ...(callRows.length
        ? [
            `Syscalls per run of the worker's threads (\`strace -c\`, one traced drain per variant, children not traced):`,
            '',
            markdownTable(callHeader, callRows, callAlign),
            '',
          ]
        : ['strace was not available: no syscall counts.', '']),
    ],
  );
}
