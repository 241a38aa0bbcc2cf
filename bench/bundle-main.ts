/**
 * The `bundle` group of `npm run bench` (issue 19): trigger → running of a run whose revision pins a
 * script bundle (10 MiB of random bytes in 500 files and a node script, by default), beside an inline
 * command doing the same trivial work, in one run. Per dialect: a control plane in its own process
 * and one real worker process (`QL_WORKER_RUNNING_REPORT_DELAY_MS=0`: `running` is reported as soon as
 * the process exists, so the figure ends at the spawn, not 20 ms later, and a quick command still has
 * its own `attempt.running`). Each round pushes a new bundle (the worker's cache never had it: the
 * first run downloads, verifies and unpacks it), runs it once, then alternates cached and inline runs.
 * One run at a time; the next is triggered once the worker is idle (the last run's work folder gone,
 * a bundle's spare copy made), so no run pays for the one before. CPU per run by process from /proc, from the trigger to that removal.
 */
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { WORKER_NODE_FLAGS } from '../apps/worker/src/node-flags';
import {
  BUNDLE_COMMAND,
  BundleConfig,
  BundleSample,
  BundleVariant,
  CACHED_TARGET,
  INLINE_COMMAND,
  VariantSummary,
  benchBundle,
  bundleConfig,
  roundOrder,
  summarizeBundle,
} from './bundle';
import { measureCopyWays } from './bundle-copy';
import { postgresCpuMs } from './dispatch-cpu';
import {
  BenchPki,
  Dialect,
  PlaneProcess,
  WORKER_MAIN,
  createBenchPki,
  createPlaneDatabase,
  startPlaneProcess,
} from './lib/plane';
import { localPostmasterPid, redactUrl } from './lib/postgres-admin';
import { BenchProcess, cpuMs, pollUntil, spawnNode } from './lib/processes';
import { processTreeCpuMs, readCpu } from './lib/proc-cpu';
import { Align, MachineInfo, fmtPct, machineInfo, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';

const WORKER_ID = 'bundle-w1';

interface RunEvent {
  readonly type: string;
  readonly at: string;
}

async function pushBundle(plane: PlaneProcess, content: Buffer): Promise<void> {
  const res = await fetch(`${plane.ready.adminUrl}/api/v1/bundles`, {
    method: 'POST',
    headers: { authorization: `Bearer ${plane.adminToken}`, 'content-type': 'application/gzip' },
    body: content,
  });
  if (res.status !== 200) throw new Error(`push bundle: ${res.status} ${await res.text()}`);
}

async function createTask(plane: PlaneProcess, body: Record<string, unknown>): Promise<string> {
  const res = await plane.admin<{ id: string }>('POST', '/api/v1/tasks', {
    runtime: 'shell',
    timeoutMs: 60_000,
    ...body,
  });
  if (res.status !== 201) throw new Error(`create task: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id;
}

/** The worker's folders the bench watches to know it is idle again. */
interface WorkerFolders {
  readonly work: string;
  readonly cache: string;
}

/**
 * One run of `taskId`, alone: trigger, its end (the worker's log), its events; then until the worker
 * is idle: the run's work folder removed and, for a bundle's run, its spare copy made (a build with
 * spare copies has `.spare/` in its cache).
 */
async function oneRun(
  plane: PlaneProcess,
  worker: BenchProcess,
  folders: WorkerFolders,
  cpu: Record<string, () => number>,
  taskId: string,
  bundle: { digest: string; expect: 'bundle fetched for the attempt' | 'bundle taken from the cache' } | null,
): Promise<Omit<BundleSample, 'dialect' | 'round' | 'variant'>> {
  const expectBundle = bundle?.expect ?? null;
  const before = readCpu(cpu);
  const linesBefore = worker.lines.length;
  const sentMs = Date.now();
  const trigger = await plane.admin<{ run: { id: string } }>('POST', `/api/v1/tasks/${taskId}/runs`, {});
  if (trigger.status !== 201) throw new Error(`trigger: ${trigger.status} ${JSON.stringify(trigger.body)}`);
  const runId = trigger.body.run.id;
  const mine = (msg: string) =>
    worker.lines.slice(linesBefore).find((l) => l.msg === msg && l.runId === runId);
  await pollUntil(
    `run ${runId} completed by the worker`,
    () => {
      if (worker.child.exitCode !== null) throw new Error(`the worker exited:\n${worker.output.join('\n')}`);
      return mine('attempt completed') ?? mine('attempt could not start');
    },
    60_000,
  );
  await pollUntil(
    'the work folder removed',
    () => (readdirSync(folders.work).length === 0 ? true : undefined),
    30_000,
  );
  const spares = join(folders.cache, '.spare');
  if (bundle && existsSync(spares))
    await pollUntil(
      'the spare copy made',
      () => existsSync(join(spares, bundle.digest)) || undefined,
      30_000,
    );
  const cpuMsRun = readCpu(cpu);
  const detail = await plane.admin<{ status: string; events: RunEvent[] }>('GET', `/api/v1/runs/${runId}`);
  if (detail.status !== 200 || detail.body.status !== 'succeeded')
    throw new Error(`run ${runId}: ${detail.status} ${JSON.stringify(detail.body).slice(0, 2000)}`);
  for (const msg of ['bundle fetched for the attempt', 'bundle taken from the cache'] as const)
    if ((mine(msg) !== undefined) !== (msg === expectBundle))
      throw new Error(`run ${runId}: expected ${expectBundle ?? 'no bundle'}, the worker said otherwise`);
  const at = (type: string) => {
    const found = detail.body.events.filter((e) => e.type === type);
    if (found.length !== 1) throw new Error(`run ${runId}: ${found.length} ${type} events`);
    return Date.parse(found[0]!.at);
  };
  return {
    toRunningMs: at('attempt.running') - sentMs,
    startingToRunningMs: at('attempt.running') - at('attempt.starting'),
    cpuMs: Object.fromEntries(Object.keys(before).map((k) => [k, cpuMsRun[k]! - before[k]!])),
  };
}

async function benchDialect(
  dialect: Dialect,
  cfg: BundleConfig,
  pgUrl: string,
  pki: BenchPki,
  samples: BundleSample[],
  log: (line: string) => void,
): Promise<void> {
  const cleanup: (() => Promise<void>)[] = [];
  try {
    const db = await createPlaneDatabase(dialect, pgUrl);
    cleanup.push(() => db.drop());
    const plane = await startPlaneProcess(db, pki);
    cleanup.push(() => plane.stop());
    const env = pki.workerEnv(WORKER_ID, plane.ready.ingressUrl);
    const folders = {
      work: env.QL_WORKER_WORK_DIR!,
      cache: join(dirname(env.QL_WORKER_WORK_DIR!), `bundles-${dialect}`),
    };
    const worker = spawnNode([...WORKER_NODE_FLAGS, WORKER_MAIN], {
      ...env,
      QL_WORKER_BUNDLE_CACHE_DIR: folders.cache,
      QL_WORKER_RUNNING_REPORT_DELAY_MS: '0',
    });
    cleanup.push(() => worker.stop());
    await worker.untilLine('worker registered', 60_000);
    const postmaster =
      dialect === 'postgres' ? await localPostmasterPid(pgUrl).catch(() => undefined) : undefined;
    const cpu: Record<string, () => number> = {
      plane: () => cpuMs(plane.process.pid),
      worker: () => cpuMs(worker.pid),
      // The runs' processes, reaped by the worker (and its reaper `sh`, live).
      task: () => processTreeCpuMs(worker.pid).children,
      ...(postmaster === undefined ? {} : { postgres: () => postgresCpuMs(postmaster) }),
    };
    const inlineTask = await createTask(plane, { name: 'bundle bench inline', command: INLINE_COMMAND });
    const run = async (round: number, variant: BundleVariant, taskId: string, digest: string) => {
      const bundle =
        variant === 'inline'
          ? null
          : {
              digest,
              expect:
                variant === 'first'
                  ? ('bundle fetched for the attempt' as const)
                  : ('bundle taken from the cache' as const),
            };
      const sample = await oneRun(plane, worker, folders, cpu, taskId, bundle);
      samples.push({ dialect, round, variant, ...sample });
    };
    // An uncounted run of each kind first: the worker's first spawn, first bundle code, warm.
    const warm = benchBundle(0.1, 10);
    await pushBundle(plane, warm.content);
    const warmTask = await createTask(plane, {
      name: 'bundle bench warm-up',
      command: BUNDLE_COMMAND,
      bundle: { digest: warm.digest },
    });
    for (const [taskId, expect] of [
      [warmTask, 'bundle fetched for the attempt'],
      [warmTask, 'bundle taken from the cache'],
      [inlineTask, null],
    ] as const)
      await oneRun(plane, worker, folders, cpu, taskId, expect && { digest: warm.digest, expect });
    for (let round = 1; round <= cfg.rounds; round++) {
      const b = benchBundle(cfg.mib, cfg.files);
      await pushBundle(plane, b.content);
      const bundleTask = await createTask(plane, {
        name: `bundle bench round ${round}`,
        command: BUNDLE_COMMAND,
        bundle: { digest: b.digest },
      });
      await run(round, 'first', bundleTask, b.digest);
      for (const variant of roundOrder(round, cfg.runsPerRound))
        await run(round, variant, variant === 'inline' ? inlineTask : bundleTask, b.digest);
      const mine = samples.filter((s) => s.dialect === dialect && s.round === round);
      log(
        `bundle ${dialect} round ${round}: ` +
          (['first', 'cached', 'inline'] as const)
            .map(
              (v) =>
                `${v} ${mine
                  .filter((s) => s.variant === v)
                  .map((s) => s.toRunningMs)
                  .join('/')} ms`,
            )
            .join(', '),
      );
    }
  } finally {
    for (const undo of cleanup.reverse()) await undo().catch(() => undefined);
  }
}

export async function bundleMain(resultsDir: string): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const cfg = bundleConfig();
  const pgUrl = process.env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const log = (line: string) => console.log(line);
  log(
    `bundle bench: ${cfg.mib} MiB in ${cfg.files} files, ${cfg.rounds} rounds of 1 first + ` +
      `${cfg.runsPerRound} cached + ${cfg.runsPerRound} inline runs; ${cfg.dialects.join(', ')} ` +
      `(${redactUrl(pgUrl)}); node ${machine.node}, ${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart}`,
  );
  const samples: BundleSample[] = [];
  const notes: string[] = [];
  const pki = await createBenchPki([WORKER_ID]);
  try {
    for (const dialect of cfg.dialects) {
      try {
        await benchDialect(dialect, cfg, pgUrl, pki, samples, log);
      } catch (error) {
        notes.push(`${dialect}: stopped early (${(error as Error).message.split('\n')[0]})`);
        log(notes.at(-1)!);
      }
    }
  } finally {
    pki.remove();
  }
  log('bundle: the four ways of making the working folder, on the same tree');
  const ways = await measureCopyWays(cfg.mib, cfg.files, cfg.rounds);
  reportBundle(resultsDir, started, machine, cfg, summarizeBundle(samples), samples, ways, notes);
}

function reportBundle(
  resultsDir: string,
  started: Date,
  machine: MachineInfo,
  cfg: BundleConfig,
  rows: readonly VariantSummary[],
  samples: readonly BundleSample[],
  ways: Awaited<ReturnType<typeof measureCopyWays>>,
  notes: readonly string[],
): void {
  const components = [...new Set(rows.flatMap((r) => Object.keys(r.cpuMs)))];
  const header = [
    'dialect',
    'variant',
    'runs',
    'trigger → running median ms',
    'p90 ms',
    '/ inline (medians)',
    '/ inline (paired)',
    'target',
    'starting → running median ms',
    '/ inline',
    ...components.map((c) => `CPU ms/run ${c}`),
  ];
  const align: Align[] = header.map((_, i) => (i < 2 ? 'left' : 'right'));
  const table = rows.map((r) => [
    r.dialect,
    r.variant,
    String(r.runs),
    r.medianMs.toFixed(0),
    r.p90Ms.toFixed(0),
    fmtPct(r.ratioToInline),
    fmtPct(r.pairedRatio),
    r.variant === 'cached'
      ? `≤ ${fmtPct(CACHED_TARGET)} ${r.pairedRatio <= CACHED_TARGET ? 'pass' : 'FAIL'}`
      : '',
    r.startingToRunningMedianMs.toFixed(0),
    fmtPct(r.startingToRunningRatio),
    ...components.map((c) => (r.cpuMs[c] === undefined ? '—' : r.cpuMs[c]!.toFixed(1))),
  ]);
  const waysHeader = ['way', 'samples', 'wall ms', 'CPU ms', '/ copyTree (wall)', 'rm -r ms'];
  const waysAlign: Align[] = waysHeader.map((_, i) => (i === 0 ? 'left' : 'right'));
  const tree = ways.rows.find((r) => r.way === 'copyTree')!;
  const waysTable = ways.rows.map((r) => [
    r.way,
    String(r.samples),
    r.wallMs.toFixed(1),
    r.cpuMs.toFixed(1),
    fmtPct(r.wallMs / tree.wallMs),
    r.removeMs.toFixed(1),
  ]);
  const unpackLine = `unpacking the same bundle (what a first run adds to its download): median ${ways.unpackMs.toFixed(0)} ms`;
  console.log('');
  console.log(textTable(header, table, align));
  console.log('');
  console.log(textTable(waysHeader, waysTable, waysAlign));
  console.log(unpackLine);
  for (const n of notes) console.log(n);
  const markdown = [
    '# Bundle start latency: first run / cached / inline command (issue 19)',
    '',
    `Run ${machine.date} — node ${machine.node}, ${machine.platform}, ${machine.cpuCount} × ${machine.cpuModel}, ` +
      `${machine.totalMemMiB} MiB, 1-min load at start ${machine.loadAvgAtStart}.`,
    '',
    `A bundle of ${cfg.mib} MiB of random bytes in ${cfg.files} files and \`run.js\` (\`${BUNDLE_COMMAND}\`), ` +
      `beside an inline task running \`${INLINE_COMMAND}\`; one real worker process, a control plane in ` +
      `its own process. ${cfg.rounds} rounds, each with a new bundle (first run: download, verify, unpack), ` +
      `then ${cfg.runsPerRound} cached and ${cfg.runsPerRound} inline runs alternated. Trigger → running: the ` +
      'trigger sent → the `attempt.running` event (`QL_WORKER_RUNNING_REPORT_DELAY_MS=0`). **/ inline ' +
      '(medians)** = median / the inline median of the same dialect and run; **(paired)** = the median ' +
      "over each round's pairs (k-th run / k-th inline run of the round; both share their moment, so a " +
      'busy neighbour moves it less); **starting → running** is the step where the bundle is taken and ' +
      `copied. Target: cached ≤ ${fmtPct(CACHED_TARGET)} of inline, paired (the noise of a shared machine ` +
      'lands mostly in the claim before `starting`, which no bundle touches, and moves a ratio of medians ' +
      'more than one of pairs). ' +
      "CPU: medians per run from the trigger to its work folder removed (`task`: the run's own processes). " +
      'The machine is shared: read the ratios, not the absolute figures.',
    '',
    markdownTable(header, table, align),
    '',
    'The ways of making the working folder, in this process, on the same unpacked tree, alternated ' +
      '(`fs.cp`: what the worker did before; `copyTree`: its batched synchronous copy, with ' +
      "`COPYFILE_FICLONE`; hard links: shared inodes, rejected (ADR 0051); spare rename: the attempt's " +
      'part when a spare copy was made ahead, as the worker now does):',
    '',
    markdownTable(waysHeader, waysTable, waysAlign),
    '',
    unpackLine,
    '',
    ...notes.map((n) => `${n}\n`),
  ];
  writeResults(
    resultsDir,
    'bundle',
    started,
    { benchmark: 'bundle', config: cfg, machine, rows, ways, notes, samples },
    markdown,
  );
}
