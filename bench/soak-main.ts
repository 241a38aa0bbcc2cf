/**
 * The `soak` group of `npm run bench` (issue 17, idea 5): the control plane's memory under a long
 * steady load (bench/soak.ts measures), the slope of its RSS after the settle beside the target
 * "flat", written to soak-<time>.json and latest-soak.md.
 */
import type { SqlitePragmas } from '../libs/persistence/src/sqlite/sqlite-database';
import type { Dialect } from './lib/plane';
import { levelName } from './peer';
import { Align, machineInfo, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';
import { SoakResult, SoakSample, leastSquaresSlope, measureSoak, soakConfig } from './soak';

/**
 * Flat: an RSS slope of at most 0.1 MiB/min after the settle. Why this figure: a plane's RSS moves by
 * a few MiB between garbage collections, so a least-squares slope over 25 minutes of 15 s samples has
 * a noise of a few hundredths of a MiB/min; 0.1 is well above that noise, and still small enough to
 * catch a real leak: at 10 runs/s it is 0.17 KiB kept per run, and at 0.1 MiB/min a plane would take
 * a day to grow 144 MiB — a leak that small is still one, but no smaller one can be told from noise
 * in 25 minutes on this machine.
 */
export const FLAT_MIB_PER_MIN = 0.1;

const mib = (n: number) => n.toFixed(1);

/** Slopes (MiB/min) of the samples at or after the settle. */
export function soakSlopes(samples: readonly SoakSample[], settleMinutes: number) {
  const after = samples.filter((s) => s.t >= settleMinutes * 60 - 1);
  const slope = (pick: (s: SoakSample) => number) =>
    leastSquaresSlope(after.map((s) => ({ x: s.t / 60, y: pick(s) })));
  return {
    samples: after.length,
    rss: slope((s) => s.rssMiB),
    anon: slope((s) => s.anonMiB),
    heapUsed: slope((s) => s.heapUsedMiB),
    heapTotal: slope((s) => s.heapTotalMiB),
    workersRss: slope((s) => s.workersRssMiB),
  };
}

/**
 * The result files' name: `soak` (latest-soak.md) for PostgreSQL, the dialect shipped for a cluster;
 * `soak-sqlite` for SQLite, so that one run does not replace the other's result.
 */
export function soakResultName(dialect: Dialect): string {
  return dialect === 'postgres' ? 'soak' : `soak-${dialect}`;
}

/** The SQLite pragmas line of the report: what bounds the page cache, mmap and WAL. */
export function pragmasLine(p: SqlitePragmas): string {
  const cache = p.cacheSize < 0 ? `${p.cacheSize} (${p.cacheKiB} KiB)` : `${p.cacheSize} pages (${p.cacheKiB} KiB)`;
  return (
    `SQLite pragmas on the plane's connection: cache_size ${cache}, page_size ${p.pageSize}, ` +
    `mmap_size ${p.mmapSize}, wal_autocheckpoint ${p.walAutocheckpoint} pages, journal_mode ${p.journalMode}.`
  );
}

export async function soakMain(resultsDir: string): Promise<SoakResult> {
  const started = new Date();
  const machine = machineInfo(started);
  const cfg = soakConfig();
  const log = (line: string) => console.log(line);
  log(
    `soak bench: ${cfg.dialect}, ${levelName(cfg.level)} workers×slots, ${cfg.minutes} min ` +
      `(slope after ${cfg.settleMinutes}), node ${machine.node}, ${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart}`,
  );
  const result = await measureSoak(cfg, log);
  const slopes = soakSlopes(result.samples, cfg.settleMinutes);
  const last = result.samples.at(-1)!;
  const first = result.samples[0]!;
  const settled = result.samples.find((s) => s.t >= cfg.settleMinutes * 60 - 1) ?? first;
  const loads = result.samples.map((s) => s.loadAvg1);
  const perRunKiB = (slopes.rss * 1024) / 60 / result.rate;

  const header = ['figure', 'value', 'target', 'result'];
  const align: Align[] = ['left', 'right', 'right', 'left'];
  const rows = [
    [
      `control-plane RSS slope after ${cfg.settleMinutes} min (least squares, ${slopes.samples} samples)`,
      `${slopes.rss.toFixed(3)} MiB/min`,
      `≤ ${FLAT_MIB_PER_MIN} MiB/min (flat)`,
      Math.abs(slopes.rss) <= FLAT_MIB_PER_MIN ? 'pass' : 'FAIL',
    ],
    ['  the same per run', `${perRunKiB.toFixed(3)} KiB/run`, '', ''],
    ['  anonymous memory slope', `${slopes.anon.toFixed(3)} MiB/min`, '', ''],
    ['  V8 heap used slope', `${slopes.heapUsed.toFixed(3)} MiB/min`, '', ''],
    ['  V8 heap size slope', `${slopes.heapTotal.toFixed(3)} MiB/min`, '', ''],
    ['  worker processes RSS slope (summed)', `${slopes.workersRss.toFixed(3)} MiB/min`, '', ''],
    ['control-plane RSS before any run (workers online) MiB', mib(result.beforeLoadRssMiB), '', ''],
    [
      'control-plane RSS first / at settle / last / max MiB',
      `${mib(first.rssMiB)} / ${mib(settled.rssMiB)} / ${mib(last.rssMiB)} / ${mib(Math.max(...result.samples.map((s) => s.rssMiB)))}`,
      '',
      '',
    ],
    [
      'V8 heap used first / at settle / last MiB',
      `${mib(first.heapUsedMiB)} / ${mib(settled.heapUsedMiB)} / ${mib(last.heapUsedMiB)}`,
      '',
      '',
    ],
    [
      'rate: triggered / finished runs/s',
      `${(last.triggered / last.t).toFixed(2)} / ${(last.finished / last.t).toFixed(2)}`,
      '',
      '',
    ],
    ['backlog at the end (runs not finished)', String(last.backlog), '', ''],
    ['runs not succeeded', JSON.stringify(result.failedRuns), '', ''],
    ...(last.walMiB === undefined
      ? []
      : [
          [
            'SQLite WAL file first / at settle / last / max MiB',
            `${mib(first.walMiB ?? 0)} / ${mib(settled.walMiB ?? 0)} / ${mib(last.walMiB)} / ${mib(Math.max(...result.samples.map((s) => s.walMiB ?? 0)))}`,
            '',
            '',
          ],
        ]),
    [
      '1-min load min / median / max',
      `${Math.min(...loads)} / ${loads.sort((a, b) => a - b)[loads.length >> 1]} / ${Math.max(...loads)}`,
      '',
      '',
    ],
  ];
  const rateLine =
    result.measuredMax === undefined
      ? `rate ${result.rate.toFixed(2)} runs/s (QL_BENCH_SOAK_RATE)`
      : `rate ${result.rate.toFixed(2)} runs/s = ${cfg.rateShare} × the ${result.measuredMax.toFixed(1)} runs/s ` +
        `a backlog of ${cfg.probeRuns} runs drained at, measured just before by the same workers`;
  const wal = last.walMiB !== undefined;
  const pragmas = result.sqlitePragmas ? [pragmasLine(result.sqlitePragmas)] : [];
  const sampleHeader = [
    'min',
    'RSS MiB',
    'anon MiB',
    'heap used MiB',
    'heap size MiB',
    'external MiB',
    'runs done',
    'backlog',
    'load',
    ...(wal ? ['WAL MiB'] : []),
  ];
  const sampleAlign: Align[] = sampleHeader.map(() => 'right');
  // One row a minute in the markdown (every sample is in the JSON).
  const perMinute = result.samples.filter(
    (s, i) => i === 0 || Math.floor(s.t / 60) !== Math.floor(result.samples[i - 1]!.t / 60),
  );
  const sampleRows = perMinute.map((s) => [
    (s.t / 60).toFixed(1),
    mib(s.rssMiB),
    mib(s.anonMiB),
    mib(s.heapUsedMiB),
    mib(s.heapTotalMiB),
    mib(s.externalMiB),
    String(s.finished),
    String(s.backlog),
    String(s.loadAvg1),
    ...(wal ? [mib(s.walMiB ?? 0)] : []),
  ]);
  console.log('');
  console.log(textTable(header, rows, align));
  console.log(rateLine);
  for (const line of pragmas) console.log(line);
  for (const note of result.notes) console.log(note);

  writeResults(
    resultsDir,
    soakResultName(cfg.dialect),
    started,
    { benchmark: 'soak', machine, result, slopes, flatMiBPerMin: FLAT_MIB_PER_MIN },
    [
      '# Control-plane memory under a steady load (soak)',
      '',
      `Run ${machine.date} — node ${machine.node}, ${machine.platform}, ${machine.cpuCount} × ${machine.cpuModel}, ` +
        `${machine.totalMemMiB} MiB, 1-min load at start ${machine.loadAvgAtStart}.`,
      '',
      `A control plane (${cfg.dialect === 'postgres' ? '`cluster-control`, PostgreSQL' : '`standalone`, SQLite'}, the launchers' ` +
        `flags and environment) and ${cfg.level.workers} real worker processes with ${cfg.level.slots} slots each; ` +
        `runs of \`echo soak\` triggered through the admin API for ${cfg.minutes} min. ${rateLine}. Every ` +
        `${cfg.sampleSeconds} s: the plane's RSS and anonymous memory from /proc, its V8 heap from its own \`/metrics\`. ` +
        `Flat: |slope| ≤ ${FLAT_MIB_PER_MIN} MiB/min (bench/soak-main.ts says why).`,
      '',
      ...pragmas.flatMap((line) => [line, '']),
      markdownTable(header, rows, align),
      '',
      '## Samples (the first of each minute)',
      '',
      markdownTable(sampleHeader, sampleRows, sampleAlign),
      '',
      ...result.notes.map((n) => `- ${n}`),
      ...(result.notes.length ? [''] : []),
    ],
  );
  return result;
}
