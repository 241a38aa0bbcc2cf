// Size: the dispatch group drives three drains per level (bench sessions, worker processes, the samples beside them) and reports four tables (end to end, CPU per run, arrivals, latency) from one place.
/**
 * The `dispatch` group of `npm run bench`: end-to-end remote runs/s at 1, 4 and 16 sessions per
 * dialect beside graphile-worker draining the same number of no-op jobs, the share of each step, and
 * queue-to-offer latency at idle. Writes dispatch-<time>.json and latest-dispatch.md.
 */
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { BenchSession, DrainSample, STEPS, drain, noopTask, percentile, queueToOffer } from './dispatch';
import { envNumber, median } from './lib/measure';
import { Dialect, createBenchPki, createPlaneDatabase, startPlaneProcess } from './lib/plane';
import { localPostmasterPid } from './lib/postgres-admin';
import { CpuReading, cpuPerRun, readCpu } from './lib/proc-cpu';
import { Align, fmtInt, fmtPct, machineInfo, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';
import { WorkerDrainSample, workerProcessDrain } from './worker-drain';
import { Beside, besideSampler } from './dispatch-beside';
import { ARRIVAL_WINDOWS_MS, ArrivalBatches, arrivalBatches } from './dispatch-arrivals';
import {
  CPU_ALIGN,
  CPU_EXPLANATION,
  CPU_HEADER,
  CpuRowInput,
  cpuRow,
  backendsWindow,
  databaseName,
  inBenchComponents,
  openBackendsReader,
  BackendsReader,
  sharedComponents,
} from './dispatch-cpu';
import { WORKER_NODE_FLAGS } from '../apps/worker/src/node-flags';

/** Issue 10: end-to-end runs/s at least graphile-worker's jobs/s; queue-to-offer p99 at most 50 ms. */
export const E2E_TARGET = 1.0;
export const LATENCY_P99_TARGET_MS = 50;
/** Ingress calls per remote run: offers, starting, running, completion. */
const CALLS_PER_RUN = 4;

interface DialectResult {
  readonly dialect: Dialect;
  readonly edgeFloorMs: number;
  readonly triggersPerSecond: number;
  /** Each drain by the bench's sessions, its CPU per run by component, and what was measured beside it. */
  readonly drains: (DrainSample &
    Beside & { readonly cpuMsPerRun: CpuReading; readonly arrivals: ArrivalBatches })[];
  /** The same drains by real worker processes (their own run loop). */
  readonly processDrains: (WorkerDrainSample & Beside)[];
  readonly latency: { fromCommitMs: number[]; fromTriggerMs: number[] };
}

function levels(): number[] {
  return (process.env.QL_BENCH_SESSIONS || '1,4,16').split(',').map((s) => {
    const n = Number(s.trim());
    if (!Number.isInteger(n) || n < 1 || n > 64) throw new Error(`QL_BENCH_SESSIONS: bad value "${s}"`);
    return n;
  });
}

async function benchDialect(
  dialect: Dialect,
  pgUrl: string,
  sessionsLevels: readonly number[],
  config: {
    runs: number;
    warmup: number;
    latencySamples: number;
    pullers: number;
    intervalMs: number;
    pullWaitMs: number;
    workerProcesses: boolean;
  },
  log: (line: string) => void,
  notes: string[],
  beside: (level: number, label: string) => Promise<Beside>,
  postmasterPid: number | undefined,
  backends: BackendsReader | undefined,
): Promise<DialectResult> {
  const count = Math.max(...sessionsLevels, config.pullers);
  const ids = Array.from({ length: count }, (_, i) => `bench-w${i + 1}`);
  const processIds = Array.from({ length: Math.max(...sessionsLevels) }, (_, i) => `proc-w${i + 1}`);
  const pki = await createBenchPki([...ids, ...processIds]);
  const db = await createPlaneDatabase(dialect, pgUrl);
  const plane = await startPlaneProcess(db, pki, {
    QL_SESSION_LEASE_MS: '600000',
    QL_INGRESS_RATE_PER_SECOND: '100000',
    QL_INGRESS_RATE_BURST: '100000',
  });
  const sessions: BenchSession[] = [];
  try {
    for (const id of ids) sessions.push(await BenchSession.register(pki, plane, id));
    const { trigger } = await noopTask(plane, `bench noop ${dialect}`);
    const queue = async (n: number, runOne = trigger) => {
      const t0 = performance.now();
      for (let i = 0; i < n; i++) await runOne();
      return n / ((performance.now() - t0) / 1000);
    };
    await queue(config.warmup);
    await drain(sessions, config.warmup);
    const edgeFloorMs = await sessions[0]!.edgeFloorMs(200);
    // PostgreSQL's CPU belongs to a run only when the plane uses it; the SQLite plane's is in its own process.
    const shared = sharedComponents(plane.process.pid, dialect === 'postgres' ? postmasterPid : undefined);
    const inBench = inBenchComponents(shared);
    const planeBackends = dialect === 'postgres' ? backends : undefined;
    const planeDb = dialect === 'postgres' ? databaseName(db.url) : '';
    const drains: DialectResult['drains'][number][] = [];
    const rates: number[] = [];
    for (const n of sessionsLevels) {
      rates.push(await queue(config.runs));
      const ownBackends = await backendsWindow(planeBackends, planeDb);
      const before = readCpu(inBench);
      const fromMs = Date.now();
      const sample = await drain(sessions.slice(0, n), config.runs);
      const arrivals = await arrivalBatches(db, fromMs - 1, Date.now() + 1);
      const cpuMsPerRun = {
        ...cpuPerRun(before, readCpu(inBench), sample.runs),
        ...(await ownBackends(sample.runs)),
      };
      log(
        `dispatch ${dialect}: ${n} sessions ${sample.runsPerSecond.toFixed(1)} runs/s, ` +
          `CPU ${cpuMsPerRun.total!.toFixed(2)} ms/run`,
      );
      drains.push({ ...sample, cpuMsPerRun, arrivals, ...(await beside(n, `${dialect}, ${n} sessions`)) });
    }
    const latency = await queueToOffer(
      sessions.slice(0, config.pullers),
      trigger,
      config.latencySamples,
      config.intervalMs,
      config.pullWaitMs,
    );
    log(`dispatch ${dialect}: queue-to-offer p99 ${percentile(latency.fromCommitMs, 99)} ms`);
    const processDrains: DialectResult['processDrains'][number][] = [];
    if (config.workerProcesses) {
      const queueTask = async (name: string, n: number) => {
        const task = await noopTask(plane, name);
        await queue(n, task.trigger);
        return task.taskId;
      };
      // The worker's own default unless set: after a run ends, the next pull waits for the pull tick.
      const pullMs = process.env.QL_BENCH_WORKER_PULL_INTERVAL_MS;
      const workerEnv: Record<string, string> = pullMs ? { QL_WORKER_PULL_INTERVAL_MS: pullMs } : {};
      for (const n of sessionsLevels) {
        try {
          const sample = await workerProcessDrain(
            plane,
            pki,
            db,
            processIds.slice(0, n),
            config.runs,
            config.warmup,
            queueTask,
            workerEnv,
            shared,
            planeBackends && (() => planeBackends(planeDb)),
          );
          log(
            `dispatch ${dialect}: ${n} worker processes ${sample.runsPerSecond.toFixed(1)} runs/s, ` +
              `CPU ${sample.cpuMsPerRun?.total?.toFixed(2) ?? '—'} ms/run`,
          );
          processDrains.push({ ...sample, ...(await beside(n, `${dialect}, ${n} worker processes`)) });
        } catch (error) {
          // Keep what this dialect measured so far; say why this level has no figure.
          notes.push(
            `${dialect}, ${n} worker processes: no figure (${(error as Error).message.split('\n')[0]})`,
          );
        }
      }
    }
    return { dialect, edgeFloorMs, triggersPerSecond: median(rates), drains, processDrains, latency };
  } finally {
    await Promise.all(sessions.map((s) => s.close()));
    await plane.stop();
    await db.drop();
    pki.remove();
  }
}

export async function dispatchMain(resultsDir: string): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const sessionsLevels = levels();
  const dialects = (process.env.QL_BENCH_DIALECTS || 'sqlite,postgres')
    .split(',')
    .map((s) => s.trim()) as Dialect[];
  const pgUrl = process.env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const config = {
    runs: Math.floor(envNumber('QL_BENCH_E2E_RUNS', 150, 1)),
    warmup: Math.floor(envNumber('QL_BENCH_E2E_WARMUP', 20, 1)),
    latencySamples: Math.floor(envNumber('QL_BENCH_LATENCY_SAMPLES', 100, 1)),
    pullers: Math.floor(envNumber('QL_BENCH_LATENCY_PULLERS', 4, 1)),
    intervalMs: envNumber('QL_BENCH_PULL_INTERVAL_MS', 100, 1),
    /** Long-poll pulls (ADR 0019); 0 measures the polling pullers of before. */
    pullWaitMs: envNumber('QL_BENCH_PULL_WAIT_MS', 2_000, 0),
    workerProcesses: process.env.QL_BENCH_WORKER_PROCESSES !== '0',
  };
  console.log(
    `dispatch bench: ${config.runs} no-op runs per level (after ${config.warmup}), sessions ${sessionsLevels.join(', ')}; ` +
      `latency ${config.latencySamples} samples, ${config.pullers} pullers every ${config.intervalMs} ms; ` +
      `node ${machine.node}, ${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart}`,
  );
  const notes: string[] = [];
  // The server's processes, when it runs on this host: its CPU per run and per graphile job.
  const postmasterPid = await localPostmasterPid(pgUrl).catch(() => undefined);
  if (postmasterPid === undefined)
    notes.push('PostgreSQL CPU not read: the server is not a local process this bench can see');
  const backendsReader = postmasterPid === undefined ? undefined : await openBackendsReader(pgUrl);
  const backends = backendsReader?.read;
  const beside = besideSampler(pgUrl, postmasterPid, backends, config.runs, config.warmup, notes);
  const results: DialectResult[] = [];
  try {
    for (const dialect of dialects) {
      try {
        results.push(
          await benchDialect(
            dialect,
            pgUrl,
            sessionsLevels,
            config,
            (l) => console.log(l),
            notes,
            beside,
            postmasterPid,
            backends,
          ),
        );
      } catch (error) {
        const note = `${dialect} rows skipped: ${(error as Error).message}`;
        console.log(note);
        notes.push(note);
      }
    }
  } finally {
    await backendsReader?.close();
  }

  const e2eHeader = [
    'dialect',
    'sessions',
    'runs/s',
    'graphile jobs/s (PostgreSQL)',
    'ratio',
    'target',
    'spawn ceiling /s',
    'runs / ceiling',
    'worker processes runs/s',
    'processes / graphile',
    'processes / ceiling',
    'beside processes: graphile jobs/s, ceiling /s',
    ...STEPS.map((s) => `${s} ms (share)`),
    'HTTP/TLS floor share',
  ];
  const e2eAlign: Align[] = e2eHeader.map((_, i) => (i === 0 ? 'left' : 'right'));
  const e2eRows = results.flatMap((r) =>
    r.drains.map((d) => {
      const peer = d.peer?.jobsPerSecond;
      const ceiling = d.ceiling?.spawnsPerSecond;
      const processes = r.processDrains.find((p) => p.workers === d.sessions);
      const processPeer = processes?.peer?.jobsPerSecond;
      const processCeiling = processes?.ceiling?.spawnsPerSecond;
      const total = STEPS.reduce((sum, s) => sum + d.stepMs[s], 0);
      return [
        r.dialect,
        String(d.sessions),
        d.runsPerSecond.toFixed(1),
        fmtInt(peer),
        peer ? fmtPct(d.runsPerSecond / peer) : '—',
        `≥ ${fmtPct(E2E_TARGET)}`,
        ceiling ? ceiling.toFixed(1) : '—',
        ceiling ? fmtPct(d.runsPerSecond / ceiling) : '—',
        processes ? processes.runsPerSecond.toFixed(1) : '—',
        processes && processPeer ? fmtPct(processes.runsPerSecond / processPeer) : '—',
        processes && processCeiling ? fmtPct(processes.runsPerSecond / processCeiling) : '—',
        processes ? `${fmtInt(processPeer)}, ${processCeiling?.toFixed(1) ?? '—'}` : '—',
        ...STEPS.map((s) => `${d.stepMs[s].toFixed(2)} (${fmtPct(d.stepMs[s] / total)})`),
        fmtPct(Math.min(1, (CALLS_PER_RUN * r.edgeFloorMs) / total)),
      ];
    }),
  );
  const cpuInputs: CpuRowInput[] = results.flatMap((r) => [
    ...r.drains.map((d) => ({
      dialect: r.dialect,
      level: d.sessions,
      drainedBy: 'bench sessions' as const,
      ...d,
    })),
    ...r.processDrains.map((p) => ({
      dialect: r.dialect,
      level: p.workers,
      drainedBy: 'worker processes' as const,
      ...p,
    })),
  ]);
  const cpuRows = cpuInputs.map(cpuRow);
  const arrivalHeader = [
    'dialect',
    'sessions',
    'runs/s',
    ...ARRIVAL_WINDOWS_MS.map((w) => `claims: mean batch, ${w} ms window`),
    ...ARRIVAL_WINDOWS_MS.map((w) => `completions: mean batch, ${w} ms window`),
  ];
  const arrivalAlign: Align[] = arrivalHeader.map((_, i) => (i === 0 ? 'left' : 'right'));
  const arrivalRows = results.flatMap((r) =>
    r.drains.map((d) => [
      r.dialect,
      String(d.sessions),
      d.runsPerSecond.toFixed(1),
      ...ARRIVAL_WINDOWS_MS.map((w) => d.arrivals.claims[w]!.toFixed(2)),
      ...ARRIVAL_WINDOWS_MS.map((w) => d.arrivals.completions[w]!.toFixed(2)),
    ]),
  );
  const latencyHeader = [
    'dialect',
    'p50 ms',
    'p99 ms',
    'max ms',
    'target p99',
    'result',
    'p50 / p99 from trigger sent ms',
  ];
  const latencyAlign: Align[] = latencyHeader.map((_, i) => (i === 0 || i === 5 ? 'left' : 'right'));
  const latencyRows = results.map((r) => {
    const p99 = percentile(r.latency.fromCommitMs, 99);
    return [
      r.dialect,
      String(percentile(r.latency.fromCommitMs, 50)),
      String(p99),
      String(Math.max(...r.latency.fromCommitMs)),
      `≤ ${LATENCY_P99_TARGET_MS} ms`,
      p99 <= LATENCY_P99_TARGET_MS ? 'pass' : 'FAIL',
      `${percentile(r.latency.fromTriggerMs, 50)} / ${percentile(r.latency.fromTriggerMs, 99)}`,
    ];
  });
  const floorLines = results.map(
    (r) =>
      `${r.dialect}: one ingress call refused at the edge (HTTP + TLS + guard + parse, no database) ` +
      `${r.edgeFloorMs.toFixed(2)} ms median; admin triggers ${r.triggersPerSecond.toFixed(0)}/s sequential`,
  );

  console.log('');
  console.log(textTable(e2eHeader, e2eRows, e2eAlign));
  for (const line of floorLines) console.log(line);
  console.log('');
  console.log(textTable(CPU_HEADER, cpuRows, CPU_ALIGN));
  console.log('');
  console.log(textTable(arrivalHeader, arrivalRows, arrivalAlign));
  console.log('');
  console.log(textTable(latencyHeader, latencyRows, latencyAlign));
  for (const n of notes) console.log(n);

  // How busy the shared machine was: runs/s move with it, the CPU figures much less.
  const loadAtEnd = Number(loadavg()[0]!.toFixed(2));
  writeResults(
    resultsDir,
    'dispatch',
    started,
    {
      benchmark: 'dispatch',
      machine,
      loadAtEnd,
      config,
      sessionsLevels,
      results,
      postmasterPid: postmasterPid ?? null,
      notes,
    },
    [
      '# Dispatch over the real wire: end-to-end runs/s and queue-to-offer latency',
      '',
      `Run ${machine.date} — node ${machine.node}, ${machine.platform}, ${machine.cpuCount} × ${machine.cpuModel}, ` +
        `${machine.totalMemMiB} MiB, 1-min load at start ${machine.loadAvgAtStart}, at the end ${loadAtEnd}.`,
      '',
      'The control plane runs in its own process (`dist/apps/control-plane/src/main.js`); the worker ' +
        "sessions run in the bench process, each through the worker's own `WorkerIngressHttpsClient` " +
        '(mTLS, one keep-alive socket): offers → starting → spawn `sh -c true` in its own process group → ' +
        'running → completion, so that each step can be timed. ' +
        `${config.runs} queued no-op runs per level (after ${config.warmup} warm-up), timed from the first pull ` +
        'to the last committed completion. graphile-worker 0.16.6 drains the same number of no-op jobs ' +
        '(after the same warm-up) at the same concurrency on the same PostgreSQL server, in this process. ' +
        '"worker processes": the same drain by as many real worker processes (`node ' +
        `${WORKER_NODE_FLAGS.join(' ')} dist/apps/worker/bundle/main.js\`, their own run loop and executor, ` +
        "one slot each, default pull interval), timed by the database from the warm-up's last `finished_at` " +
        'to the last one.',
      '',
      'Right after each drain, at the same level, two samples are taken beside it (so that ours and ' +
        'theirs alternate: ours, ceiling, graphile, ours, …): the **spawn ceiling** — a separate `node ' +
        `${WORKER_NODE_FLAGS.join(' ')}\` process spawning \`sh -c true\` as the worker's executor does ` +
        '(detached process group, stdin ignored, stdout/stderr piped, awaited to exit and close) in as many ' +
        `closed loops as the level, ${config.runs} spawns after ${config.warmup} — and graphile-worker ` +
        '(fresh database). "runs / ceiling" and "processes / ceiling" divide by the ceiling measured beside ' +
        'that drain; "ratio" and "processes / graphile" by the graphile sample beside it. A worker that ' +
        'starts one process per run cannot drain faster than the ceiling, whatever the control plane does.',
      '',
      'Steps are medians per run as the session saw them (wall time, HTTP/TLS included): claim = the ' +
        '`offers` call; activation = `starting` + `running`; spawn = fork/exec and exit of `sh -c true`; ' +
        `completion = the \`completion\` call. HTTP/TLS floor share = ${CALLS_PER_RUN} × one call refused at ` +
        'the edge / the sum of the steps.',
      '',
      markdownTable(e2eHeader, e2eRows, e2eAlign),
      '',
      ...floorLines.map((l) => `- ${l}`),
      '',
      '## CPU per run by component',
      '',
      CPU_EXPLANATION,
      '',
      markdownTable(CPU_HEADER, cpuRows, CPU_ALIGN),
      '',
      '## Do claims and completions arrive together? (ADR 0027)',
      '',
      'From the events each drain wrote (database time): the mean size of the batches a coalescing ' +
        'window would have formed over the drain (a batch opens at an arrival and takes every arrival ' +
        'within the window after it; 1.00 = nothing to coalesce). Heartbeats, at thousands per second, ' +
        'fill their batches (ADR 0018); a fleet that starts a process per run cannot send claims and ' +
        'completions that fast (the spawn ceiling above). Claims that queue behind a busy claim ' +
        'statement are sent together without any window (ADR 0027, `npm run bench -- claim`).',
      '',
      markdownTable(arrivalHeader, arrivalRows, arrivalAlign),
      '',
      `## Queue-to-offer latency at idle`,
      '',
      (config.pullWaitMs > 0
        ? `${config.pullers} sessions each keep one long-poll pull held (\`waitMs\` ${config.pullWaitMs}, ADR 0019)`
        : `${config.pullers} sessions pull every ${config.intervalMs} ms (staggered, polling: QL_BENCH_PULL_WAIT_MS=0)`) +
        `; one run is triggered at a time after a random idle pause, ${config.latencySamples} samples. Latency = the offer ` +
        "received by a puller − the run's `createdAt` (database time of the trigger's insert, same host clock, " +
        'ms resolution). Beside it: one ingress call refused at the edge (above), the floor of any answer.',
      '',
      markdownTable(latencyHeader, latencyRows, latencyAlign),
      '',
      ...notes.map((n) => `${n}\n`),
    ],
  );
}
