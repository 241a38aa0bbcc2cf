/**
 * The `peer` group's tables (bench/peer-main.ts measures): runs/s, CPU per run by process class and
 * latency at idle, each beside the peer's and its target, printed and written to peer-<time>.json and
 * latest-peer.md.
 */
import { loadavg } from 'node:os';
import { WORKER_NODE_FLAGS } from '../apps/worker/src/node-flags';
import { median } from './lib/measure';
import { redactUrl } from './lib/postgres-admin';
import { Align, MachineInfo, fmtPct, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';
import type { GraphilePeerResult } from './peer-graphile';
import { LATENCY_STEPS, Level, RunLatency, levelName, paired, stepSummary, summarize } from './peer';
import type { WorkerDrainSample } from './worker-drain';

export interface PeerConfig {
  readonly levels: Level[];
  readonly runs: number;
  readonly warmup: number;
  readonly rounds: number;
  readonly latencySamples: number;
  readonly latencyWarmup: number;
  readonly pauseMs: number;
}

/** The targets the figures are printed against: ratios to the peer measured in the same run. */
export const TARGETS = { runsRatio: 1.0, cpuRatio: 1.5, p50Ratio: 2.0, p99Ms: 25 };

export interface RoundSample {
  readonly round: number;
  readonly level: string;
  readonly ours?: WorkerDrainSample;
  readonly peer?: GraphilePeerResult;
}

/** CPU ms per run by process class; `total` = the classes (the whole server is apart: shared). */
export interface CpuClasses {
  readonly plane?: number;
  readonly workers?: number;
  readonly graphile?: number;
  readonly tasks: number;
  readonly backends: number;
  readonly total: number;
  readonly server?: number;
}

export function oursCpu(s: WorkerDrainSample | undefined): CpuClasses | undefined {
  const c = s?.cpuMsPerRun;
  if (!c || c.postgresDb === undefined) return undefined;
  const [plane, workers, tasks, backends] = [c.plane!, c.worker!, c.noop!, c.postgresDb];
  return { plane, workers, tasks, backends, total: plane + workers + tasks + backends, server: c.postgres };
}

export function peerCpu(p: GraphilePeerResult | undefined): CpuClasses | undefined {
  const tasks = p?.probesCpuMsPerJob?.children;
  if (!p || tasks === undefined || p.backendsCpuMsPerJob === undefined) return undefined;
  const graphile = p.processCpuUsPerJob / 1000;
  const backends = p.backendsCpuMsPerJob;
  return {
    graphile,
    tasks,
    backends,
    total: graphile + tasks + backends,
    server: p.probesCpuMsPerJob?.postgres,
  };
}

const ms = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? '—' : v.toFixed(2));
const pass = (ok: boolean) => (ok ? 'pass' : 'FAIL');

export function reportPeer(
  resultsDir: string,
  started: Date,
  machine: MachineInfo,
  cfg: PeerConfig,
  pgUrl: string,
  samples: readonly RoundSample[],
  ours: readonly RunLatency[],
  theirs: readonly number[],
  notes: readonly string[],
): void {
  const levels = cfg.levels.map(levelName);
  const at = (level: string) => samples.filter((s) => s.level === level);
  const runsHeader = [
    'W×S',
    'ours runs/s',
    'peer runs/s',
    'ours ÷ peer',
    'target',
    'result',
    'per round ours / peer',
  ];
  const runsAlign: Align[] = runsHeader.map((_, i) => (i === 0 || i === 5 ? 'left' : 'right'));
  const throughput = levels.map((level) => ({
    level,
    ...paired(at(level).map((s) => ({ ours: s.ours?.runsPerSecond, peer: s.peer?.jobsPerSecond }))),
  }));
  const runsRows = throughput.map((t) => [
    t.level,
    t.ours.toFixed(1),
    t.peer.toFixed(1),
    fmtPct(t.ratio),
    `≥ ${fmtPct(TARGETS.runsRatio)}`,
    Number.isNaN(t.ratio) ? '—' : pass(t.ratio >= TARGETS.runsRatio),
    at(t.level)
      .map((s) => `${s.ours?.runsPerSecond.toFixed(1) ?? '—'} / ${s.peer?.jobsPerSecond.toFixed(1) ?? '—'}`)
      .join(', '),
  ]);

  const cpuHeader = [
    'W×S',
    'side',
    'control plane',
    'worker processes',
    'graphile process',
    'tasks (sh -c true)',
    'PostgreSQL backends',
    'total ms / run',
    'ours ÷ peer',
    'target',
    'result',
    'whole PostgreSQL server',
  ];
  const cpuAlign: Align[] = cpuHeader.map((_, i) => (i <= 1 || i === 10 ? 'left' : 'right'));
  const cpu = levels.map((level) => {
    const rounds = at(level).map((s) => ({ ours: oursCpu(s.ours), peer: peerCpu(s.peer) }));
    const med = (side: 'ours' | 'peer', key: keyof CpuClasses) => {
      const values = rounds.flatMap((r) => (r[side]?.[key] === undefined ? [] : [r[side]![key]!]));
      return values.length ? median(values) : undefined;
    };
    const classes = (side: 'ours' | 'peer') =>
      Object.fromEntries(
        (['plane', 'workers', 'graphile', 'tasks', 'backends', 'total', 'server'] as const).map((k) => [
          k,
          med(side, k),
        ]),
      ) as Partial<CpuClasses>;
    const ratio = paired(rounds.map((r) => ({ ours: r.ours?.total, peer: r.peer?.total }))).ratio;
    return { level, ours: classes('ours'), peer: classes('peer'), ratio };
  });
  const cpuRows = cpu.flatMap((c) =>
    (['ours', 'peer'] as const).map((side) => {
      const v = c[side];
      const first = side === 'ours';
      return [
        first ? c.level : '',
        side,
        ms(v.plane),
        ms(v.workers),
        ms(v.graphile),
        ms(v.tasks),
        ms(v.backends),
        ms(v.total),
        first ? (Number.isNaN(c.ratio) ? '—' : `${c.ratio.toFixed(2)} ×`) : '',
        first ? `≤ ${TARGETS.cpuRatio.toFixed(1)} ×` : '',
        first ? (Number.isNaN(c.ratio) ? '—' : pass(c.ratio <= TARGETS.cpuRatio)) : '',
        ms(v.server),
      ];
    }),
  );

  const o = summarize(ours.map((l) => l.totalMs));
  const t = summarize(theirs);
  const latencyHeader = ['side', 'samples', 'p50 ms', 'p99 ms', 'max ms', 'target', 'result'];
  const latencyAlign: Align[] = latencyHeader.map((_, i) => (i === 0 || i >= 5 ? 'left' : 'right'));
  const latencyRows = [
    [
      'ours: trigger → succeeded',
      String(o.samples),
      ms(o.p50Ms),
      ms(o.p99Ms),
      ms(o.maxMs),
      `p50 ≤ ${TARGETS.p50Ratio} × peer's; p99 ≤ ${TARGETS.p99Ms} ms`,
      `${pass(o.p50Ms <= TARGETS.p50Ratio * t.p50Ms)} (${(o.p50Ms / t.p50Ms).toFixed(2)} ×); ${pass(o.p99Ms <= TARGETS.p99Ms)}`,
    ],
    ['peer: add_job → job complete', String(t.samples), ms(t.p50Ms), ms(t.p99Ms), ms(t.maxMs), '', ''],
  ];
  const steps = stepSummary(ours);
  const stepHeader = ['ours, step', 'p50 ms', 'p99 ms', 'max ms'];
  const stepAlign: Align[] = ['left', 'right', 'right', 'right'];
  const stepRows = LATENCY_STEPS.map((s) => [s, ms(steps[s].p50Ms), ms(steps[s].p99Ms), ms(steps[s].maxMs)]);

  const tables: [string[], string[][], Align[]][] = [
    [runsHeader, runsRows, runsAlign],
    [cpuHeader, cpuRows, cpuAlign],
    [latencyHeader, latencyRows, latencyAlign],
    [stepHeader, stepRows, stepAlign],
  ];
  for (const [header, rows, align] of tables) console.log(`\n${textTable(header, rows, align)}`);
  for (const n of notes) console.log(n);

  const loadAtEnd = Number(loadavg()[0]!.toFixed(2));
  writeResults(
    resultsDir,
    'peer',
    started,
    {
      benchmark: 'peer',
      machine,
      loadAtEnd,
      config: { ...cfg, levels },
      pgUrl: redactUrl(pgUrl),
      targets: TARGETS,
      throughput,
      cpu,
      latency: { ours: o, peer: t, steps, oursSamples: ours, peerSamplesMs: theirs },
      samples,
      notes,
    },
    [
      '# Our real path beside a fair peer: runs/s, CPU per run, latency at idle',
      '',
      `Run ${machine.date} — node ${machine.node}, ${machine.platform}, ${machine.cpuCount} × ${machine.cpuModel}, ` +
        `${machine.totalMemMiB} MiB, 1-min load at start ${machine.loadAvgAtStart}, at the end ${loadAtEnd}.`,
      '',
      'Ours: a control plane (`cluster-control` on PostgreSQL, settings as shipped, its own process) and W ' +
        `real worker processes (\`node ${WORKER_NODE_FLAGS.join(' ')} dist/apps/worker/bundle/main.js\`, S slots ` +
        'each, mTLS) draining runs of a shell task `true` triggered through the admin API. The peer: ' +
        'graphile-worker 0.16.6 on the same PostgreSQL server, in a `node` process of its own, whose job spawns ' +
        '`/bin/sh -c true` as our executor does (detached process group, output piped and read to the end, ' +
        'awaited to exit), at concurrency W × S. Both drain a backlog: ' +
        `${cfg.runs} runs counted after ${cfg.warmup}, ours timed by the database (\`finished_at\`), the ` +
        'peer by its `job:complete` events. Ours and the peer alternate at each level, who goes first ' +
        `changing each round; ${cfg.rounds} rounds. Ratios are paired within a round, then the median is taken.`,
      '',
      markdownTable(runsHeader, runsRows, runsAlign),
      '',
      '## CPU per run by process class',
      '',
      'CPU time (user + system, /proc, clock ticks) over each counted window, divided by the runs in it; ' +
        'medians over rounds. Ours: the control plane process; the worker processes (their own CPU, summed); ' +
        'tasks = their children (the `sh -c true` of each run and the reaper `sh`); PostgreSQL backends = the ' +
        "backends connected to the plane's database (pg_stat_activity pids, /proc; the bench's own poll of " +
        'the runs table every 100 ms is among them). The peer: its node process (graphile, its `pg` pool, the ' +
        'spawning), its children, the backends of its database. The whole server (every backend and helper ' +
        'of the shared server, other users included) is informational; the total and the ratio use the backends.',
      '',
      markdownTable(cpuHeader, cpuRows, cpuAlign),
      '',
      '## Latency at idle',
      '',
      `One run (one job) at a time after an idle pause of ${cfg.pauseMs}–${2 * cfg.pauseMs} ms, ` +
        `${cfg.latencySamples} samples in ${cfg.rounds} chunks alternating with the peer's, ` +
        `${cfg.latencyWarmup} untimed before each chunk. Ours: one worker process, one slot, as shipped (it ` +
        "keeps a long-poll pull held); from the trigger request sent to the run's `run.finished` event " +
        '(database time, same host clock, ms resolution). The peer: one graphile runner at concurrency 1 ' +
        '(LISTEN wakes it); from `add_job` sent to its `job:complete`, same process clock.',
      '',
      markdownTable(latencyHeader, latencyRows, latencyAlign),
      '',
      "Ours by step, from the run's events (`GET /api/v1/runs/{id}`):",
      '',
      markdownTable(stepHeader, stepRows, stepAlign),
      '',
      ...notes.map((n) => `${n}\n`),
    ],
  );
}
