/** The `curve` group of `npm run bench`: tables, curve-<time>.json, latest-curve.md and curve.svg. */
import { Logger } from '@nestjs/common';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ClaimVariant,
  CurveCell,
  CurveConfig,
  CurveResult,
  Figure,
  Reads,
  SweepRow,
  curvePostgres,
  curveSqlite,
} from './curve';
import { envNumber } from './lib/measure';
import { createBenchDatabase, redactUrl } from './lib/postgres-admin';
import { Align, fmtInt, fmtPct, machineInfo, markdownTable, memoryInfo, textTable } from './lib/report';
import { writeResults } from './lib/results';
import { PlotPanel, PlotSeries, formatTick, plotSvg } from './lib/svg';

function list(name: string, fallback: string): number[] {
  return (process.env[name] || fallback).split(',').map((s) => {
    const n = Number(s.trim());
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name}: bad value "${s}"`);
    return n;
  });
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];
const LABEL: Record<string, string> = { postgres: 'PostgreSQL', sqlite: 'SQLite' };

export async function curveMain(resultsDir: string): Promise<void> {
  Logger.overrideLogger(['warn', 'error']);
  const started = new Date();
  const machine = machineInfo(started);
  const claimWarmup = 100;
  const sweepPage = 64;
  const backlogs = list('QL_CURVE_BACKLOGS', '1000,100000,1000000');
  const claims = Math.floor(envNumber('QL_CURVE_CLAIMS', 600, 10));
  const smallest = Math.min(...backlogs);
  if (claims + claimWarmup > smallest || sweepPage > smallest)
    throw new Error(
      `QL_CURVE_CLAIMS: ${claims} + ${claimWarmup} warm-up claims need a backlog of at least that`,
    );
  const config: CurveConfig = {
    workers: list('QL_CURVE_WORKERS', '100,1000,10000'),
    backlogs,
    concurrency: list('QL_CURVE_CONCURRENCY', '8')[0]!,
    rounds: Math.floor(envNumber('QL_BENCH_ROUNDS', 3, 2)),
    claims,
    claimWarmup,
    heartbeats: Math.floor(envNumber('QL_CURVE_HEARTBEATS', 1500, 10)),
    heartbeatWarmup: 200,
    sweepCycles: Math.floor(envNumber('QL_CURVE_SWEEP_CYCLES', 3, 1)),
    sweepPage,
    log: (line) => console.log(line),
  };
  if (Math.min(...config.workers) < config.concurrency)
    throw new Error(
      `QL_CURVE_WORKERS: every count must be at least QL_CURVE_CONCURRENCY (${config.concurrency})`,
    );
  const dialects = (process.env.QL_BENCH_DIALECTS || 'sqlite,postgres').split(',').map((s) => s.trim());
  const pgUrl = process.env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  console.log(
    `curve bench: W = ${config.workers.join(', ')} workers × B = ${config.backlogs.join(', ')} queued runs, ` +
      `N = ${config.concurrency}, ${config.rounds} rounds; load ${machine.loadAvgAtStart}`,
  );
  const results: CurveResult[] = [];
  const notes: string[] = [];
  let postgresVersion: string | undefined;
  if (dialects.includes('postgres')) {
    const result: CurveResult = { dialect: 'postgres', cells: [], sweeps: [], fixtures: [] };
    try {
      const db = await createBenchDatabase(pgUrl);
      postgresVersion = db.serverVersion;
      try {
        await curvePostgres(db.url, config, result);
      } finally {
        await db.drop().catch((error: Error) => console.log(`could not drop ${db.name}: ${error.message}`));
      }
    } catch (error) {
      const note = `PostgreSQL curve incomplete on ${redactUrl(pgUrl)}: ${(error as Error).message}`;
      console.log(note);
      notes.push(note);
    }
    results.push(result);
  }
  if (dialects.includes('sqlite')) {
    const dir = mkdtempSync(join(tmpdir(), 'ql-bench-curve-'));
    try {
      results.push(await curveSqlite(join(dir, 'curve.sqlite'), config));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  const cells = results.flatMap((r) => r.cells);
  const sweeps = results.flatMap((r) => r.sweeps);
  const first = (c: CurveCell) => cells.find((x) => x.dialect === c.dialect)!;
  const rowsRead = (r: Record<string, Reads> | undefined, figure: string) =>
    r ? `${r[figure]!.rowsPerOp.toFixed(1)} / ${r.ceiling!.rowsPerOp.toFixed(1)}` : '—';

  const claimHeader = (what: string) => [
    'dialect',
    'backlog',
    'workers',
    `claims/s service${what}`,
    'ceiling',
    'ratio',
    'paired',
    'service vs first cell',
    'rows read/claim service / ceiling',
    'CPU µs/claim',
  ];
  const claimTable = (pick: (c: CurveCell) => Figure<ClaimVariant> | undefined) => {
    const mine = cells.filter((c) => pick(c));
    return mine.map((c) => {
      const f = pick(c)!;
      return [
        c.dialect,
        fmtInt(c.backlog),
        fmtInt(c.workers),
        fmtInt(f.median.service),
        fmtInt(f.median.ceiling),
        fmtPct(f.median.service / f.median.ceiling),
        fmtPct(f.pairedRatio),
        fmtPct(f.median.service / pick(mine.find((x) => x.dialect === c.dialect)!)!.median.service),
        rowsRead(f.reads, 'service'),
        f.cpuUsPerOp.service.toFixed(0),
      ];
    });
  };
  const claimRows = claimTable((c) => c.claim);
  const heldRows = claimTable((c) => c.held);
  const heartbeatHeader = [
    'dialect',
    'workers',
    'backlog',
    'heartbeats/s repository',
    'ceiling',
    'ratio',
    'paired',
    'repository vs first cell',
    'rows read/heartbeat repository / ceiling',
    'CPU µs/heartbeat',
  ];
  const byWorkers = [...cells].sort(
    (a, b) => a.dialect.localeCompare(b.dialect) || a.workers - b.workers || a.backlog - b.backlog,
  );
  const heartbeatTable = byWorkers.map((c) => [
    c.dialect,
    fmtInt(c.workers),
    fmtInt(c.backlog),
    fmtInt(c.heartbeat.median.repository),
    fmtInt(c.heartbeat.median.ceiling),
    fmtPct(c.heartbeat.median.repository / c.heartbeat.median.ceiling),
    fmtPct(c.heartbeat.pairedRatio),
    fmtPct(c.heartbeat.median.repository / first(c).heartbeat.median.repository),
    rowsRead(c.heartbeat.reads, 'repository'),
    c.heartbeat.cpuUsPerOp.repository.toFixed(1),
  ]);
  const firstSweep = (s: SweepRow) => sweeps.find((x) => x.dialect === s.dialect)!;
  const sweepHeader = [
    'dialect',
    'backlog',
    `ms per cycle (${sweepPage} expired leases)`,
    'vs smallest backlog',
    'ms per idle cycle',
    'vs smallest backlog ',
    'rows read per full cycle',
  ];
  const sweepTable = sweeps.map((s) => [
    s.dialect,
    fmtInt(s.backlog),
    s.fullMs.toFixed(1),
    `${(s.fullMs / firstSweep(s).fullMs).toFixed(2)} ×`,
    s.idleMs.toFixed(2),
    `${(s.idleMs / firstSweep(s).idleMs).toFixed(2)} ×`,
    s.rowsPerFullCycle === undefined ? '—' : fmtInt(s.rowsPerFullCycle),
  ]);
  const right = (header: string[], left: number) =>
    header.map((_, i): Align => (i < left ? 'left' : 'right'));

  const summary = results.map((r) => verdict(r)).filter((x): x is string => x !== undefined);
  const plans = results.flatMap((r) => r.plans ?? []);
  const flagged = plans.filter((p) => p.flagged.length > 0);
  const short = (p: (typeof plans)[number]) => `\`${p.statement.slice(0, 140)}…\``;
  const planLines = plans.length
    ? [
        ...(flagged.length
          ? flagged.map((p) => `- full scan or sort: ${short(p)}: ${p.flagged.join('; ')}`)
          : [`- none of the ${plans.length} statements the measured paths prepared scans a table or sorts.`]),
        ...plans
          .filter((p) => p.ordered.length > 0)
          .map(
            (p) =>
              `- ordered index scan (bounded by its LIMIT only while rows pass the filter): ${short(p)}: ${p.ordered.join('; ')}`,
          ),
      ]
    : [];
  const fixtureLine = results
    .map((r) => `${r.dialect}: ${r.fixtures.map((f) => `${f.what} ${f.seconds.toFixed(1)} s`).join(', ')}`)
    .join('; ');

  console.log('');
  console.log(textTable(claimHeader(''), claimRows, right(claimHeader(''), 1)));
  console.log('');
  console.log(textTable(heartbeatHeader, heartbeatTable, right(heartbeatHeader, 1)));
  console.log('');
  console.log(textTable(sweepHeader, sweepTable, right(sweepHeader, 1)));
  if (heldRows.length)
    console.log('\n' + textTable(claimHeader(' (held)'), heldRows, right(claimHeader(''), 1)));
  for (const line of [...summary, ...planLines, ...notes]) console.log(line);

  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(join(resultsDir, 'curve.svg'), plot(cells, machine.date, config.concurrency));
  const memory = memoryInfo();
  writeResults(
    resultsDir,
    'curve',
    started,
    {
      benchmark: 'cost-curve',
      config: { ...config, log: undefined },
      machine,
      versions: { postgres: postgresVersion },
      memory,
      notes,
      results,
    },
    [
      '# Cost curve: claims and heartbeats at 10² – 10⁴ workers × 10³ – 10⁶ queued runs',
      '',
      `Run ${machine.date} — node ${machine.node}, ${machine.cpuCount} × ${machine.cpuModel}, 1-min load at start ` +
        `${machine.loadAvgAtStart}${postgresVersion ? `, PostgreSQL ${postgresVersion}` : ''}.`,
      '',
      `Issue 10 item 4: claim cost must not grow with the registered workers or the backlog, heartbeat cost must ` +
        `not grow with the sessions, the sweeper's work per cycle stays fixed. One database per dialect, grown in ` +
        `place; per cell, medians of ${config.rounds} alternated samples, N = ${config.concurrency} concurrent ` +
        `loops. Claims: ${config.claims} timed after ${claimWarmup} warm-up, from the full backlog, N pullers ` +
        'spread over the registered workers; `service` is `LeasesService.offers`, `ceiling` the bare claim ' +
        'transaction raw through the same driver (bench/claim.ts). Heartbeats: ' +
        `${config.heartbeats} timed after ${config.heartbeatWarmup} warm-up, every registered worker in turn; ` +
        '`repository` is `SqlWorkerSessionRepository.heartbeat`, `ceiling` `UPDATE workers SET version = ' +
        'version + 1 WHERE worker_id = ?` raw. Rows read per operation (PostgreSQL, `pg_stat_user_tables`: ' +
        'sequential + index-fetched rows, warm-up included) is the scan detector: a statement that scans would ' +
        'make it grow with the fixture. The machine is shared: read the ratios and the rows, not the absolute figures.',
      '',
      '![claims/s and heartbeats/s over the fixture sizes](curve.svg)',
      '',
      ...summary.map((s) => `- ${s}`),
      '',
      '## Claims',
      '',
      markdownTable(claimHeader(''), claimRows, right(claimHeader(''), 1)),
      '',
      '## Heartbeats',
      '',
      markdownTable(heartbeatHeader, heartbeatTable, right(heartbeatHeader, 1)),
      '',
      '## Claims inside a preference hold',
      '',
      'At the smallest backlog, the same claims of runs that prefer a ' +
        'label no registered worker has, queued just before the sample with the hold open (R-PLC-2, ADR 0006): ' +
        'before taking such a run the claim reads the candidate workers that could outscore the puller ' +
        '(`heldRuns`, claim-preference.ts). The ceiling is the same bare claim.',
      '',
      markdownTable(claimHeader(' (held)'), heldRows, right(claimHeader(''), 1)),
      '',
      "## The sweeper's cycle",
      '',
      `One cycle as \`LeaseSweeperService.sweepOnce\` runs it (\`SqlLeaseRepository.sweep\` + ` +
        `\`SqlActivationRepository.sweepDeadlines\`, page ${sweepPage}), timed after ${sweepPage} claims whose ` +
        `leases were then made expired (the cycle requeues all of them), and a cycle with nothing due; medians of ` +
        `${config.sweepCycles}.`,
      '',
      markdownTable(sweepHeader, sweepTable, right(sweepHeader, 1)),
      '',
      ...(planLines.length ? ['## SQLite statement plans', '', ...planLines, ''] : []),
      `Fixtures (built once, grown in place): ${fixtureLine}.`,
      '',
      ...notes.map((n) => `${n}\n`),
      `memory (informational): RSS ${memory.rssMiB} MiB after the run, peak ${memory.peakRssMiB} MiB.`,
      '',
    ],
  );
}

/** One line per dialect: how far each figure moved from the smallest cell to the largest. */
function verdict(r: CurveResult): string | undefined {
  if (r.cells.length === 0) return undefined;
  const spread = (values: number[]) => `${fmtPct(Math.min(...values))} – ${fmtPct(Math.max(...values))}`;
  const claimRatios = r.cells.map((c) => c.claim.median.service / c.claim.median.ceiling);
  const beatRatios = r.cells.map((c) => c.heartbeat.median.repository / c.heartbeat.median.ceiling);
  const reads = (f: (c: CurveCell) => number | undefined) => {
    const values = r.cells.map(f).filter((v): v is number => v !== undefined);
    return values.length
      ? `${Math.min(...values).toFixed(1)} – ${Math.max(...values).toFixed(1)}`
      : undefined;
  };
  const claimRows = reads((c) => c.claim.reads?.service.rowsPerOp);
  const beatRows = reads((c) => c.heartbeat.reads?.repository.rowsPerOp);
  const heldRows = reads((c) => c.held?.reads?.service.rowsPerOp);
  return (
    `${LABEL[r.dialect]}: claim / ceiling ${spread(claimRatios)} over the ${r.cells.length} cells` +
    (claimRows ? ` (rows read per claim ${claimRows})` : '') +
    `; heartbeat / ceiling ${spread(beatRatios)}` +
    (beatRows ? ` (rows read per heartbeat ${beatRows})` : '') +
    (heldRows ? `; rows read per claim inside a preference hold ${heldRows}` : '') +
    '.'
  );
}

function plot(cells: readonly CurveCell[], date: string, n: number): string {
  const dialects = [...new Set(cells.map((c) => c.dialect))];
  const panels: PlotPanel[] = [];
  for (const dialect of dialects) {
    const mine = cells.filter((c) => c.dialect === dialect);
    const workers = [...new Set(mine.map((c) => c.workers))].sort((a, b) => a - b);
    const backlogs = [...new Set(mine.map((c) => c.backlog))].sort((a, b) => a - b);
    const lines = <K extends 'workers' | 'backlog'>(
      key: K,
      values: number[],
      x: (c: CurveCell) => number,
      y: (c: CurveCell) => [number, number],
      name: string,
    ): PlotSeries[] =>
      values.flatMap((v, i) => {
        const row = mine.filter((c) => c[key] === v).sort((a, b) => x(a) - x(b));
        const color = COLORS[i % COLORS.length]!;
        return [
          { label: `${name} ${formatTick(v)}`, color, points: row.map((c) => [x(c), y(c)[0]] as const) },
          {
            label: `ceiling, ${name} ${formatTick(v)}`,
            color,
            dash: '4 3',
            faint: true,
            points: row.map((c) => [x(c), y(c)[1]] as const),
          },
        ];
      });
    const specs: [
      string,
      string,
      number[],
      (c: CurveCell) => number,
      (c: CurveCell) => [number, number],
      string,
    ][] = [
      [
        'claims/s (service)',
        'queued runs',
        workers,
        (c) => c.backlog,
        (c) => [c.claim.median.service, c.claim.median.ceiling],
        'workers',
      ],
      [
        'heartbeats/s (repository)',
        'registered workers',
        backlogs,
        (c) => c.workers,
        (c) => [c.heartbeat.median.repository, c.heartbeat.median.ceiling],
        'backlog',
      ],
    ];
    for (const [what, xName, values, x, y, name] of specs)
      panels.push({
        title: `${LABEL[dialect]}: ${what}, N = ${n}`,
        xLabel: `${xName} (log scale)`,
        yLabel: what.split(' ')[0]!,
        xLog: true,
        series: lines(name === 'workers' ? 'workers' : 'backlog', values, x, y, name),
      });
  }
  return plotSvg(
    panels,
    2,
    `bench curve, ${date}: solid = through the repository, dashed = its ceiling in the same cell (bench/results/latest-curve.md)`,
  );
}
