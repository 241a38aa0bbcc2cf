/**
 * `npm run bench -- journal` (ADR 0041): what one durable journal step costs a worker, per variant of
 * bench/journal-child.ts, each sample in a fresh Node process with the worker's V8 flags
 * (`WORKER_NODE_FLAGS`) and a fresh folder under the OS temp folder, variants interleaved round by
 * round (their order rotating), median of `QL_BENCH_ROUNDS`:
 *
 * - `legacy`: the per-record files of before ADR 0041 — temp file, write, fsync, rename, folder fsync
 *   per step through the promise API (the old code, kept in bench/journal-legacy.ts for this only);
 * - `log`: the worker's `WorkerJournal` now — one frame and one write per step, an fdatasync only
 *   at `launching`, `started` and the outcome (ADR 0043);
 * - `ceiling`: the same frames, `writeSync` (+ `fdatasyncSync` where the log syncs), nothing else;
 * - `every`: the same frames, each `writeSync` + `fdatasyncSync` (ADR 0041's rule: every step durable).
 *
 * Figures: steps/s and CPU µs per step (user + system of the whole process: the thread pool's fs work
 * counts), and the wall time of one step (for `log` and `ceiling` the event loop waits that long).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WORKER_NODE_FLAGS } from '../apps/worker/src/node-flags';
import type { JournalSample, JournalVariant } from './journal-child';
import { envNumber, median } from './lib/measure';
import { spawnNode } from './lib/processes';
import { Align, machineInfo, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';

const VARIANTS: readonly JournalVariant[] = ['legacy', 'every', 'log', 'ceiling'];
const LABEL: Record<JournalVariant, string> = {
  legacy: 'ADR 0023: a file per record (temp, write, fsync, rename, folder fsync; promise fs)',
  every: 'ADR 0041: the same frames as now, each writeSync + fdatasyncSync',
  log: 'now: the log (a frame per step; fdatasync at launching, started, outcome: ADR 0043)',
  ceiling: 'ceiling: the same frames, writeSync (+ fdatasyncSync where the log syncs) only',
};

async function runSample(
  variant: JournalVariant,
  root: string,
  runs: number,
  warmup: number,
): Promise<JournalSample> {
  const dir = mkdtempSync(join(root, `${variant}-`));
  try {
    const proc = spawnNode(
      [
        ...WORKER_NODE_FLAGS,
        join(__dirname, 'journal-child.js'),
        variant,
        join(dir, 'journal'),
        String(runs),
        String(warmup),
      ],
      {},
    );
    const code = await proc.exited;
    const result = proc.lines.find((l) => l.variant === variant);
    if (code !== 0 || !result)
      throw new Error(`journal sample ${variant} exited ${code}: ${proc.output.join('\n')}`);
    return result as unknown as JournalSample;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function filesystemOf(path: string): string {
  try {
    const line = execFileSync('df', ['-T', path], { encoding: 'utf8' }).trim().split('\n')[1] ?? '';
    const [device, type] = line.split(/\s+/);
    return `${type} (${device})`;
  } catch {
    return 'unknown';
  }
}

export async function journalMain(resultsDir: string): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const runs = Math.floor(envNumber('QL_BENCH_JOURNAL_RUNS', 300, 10));
  const warmup = Math.floor(envNumber('QL_BENCH_JOURNAL_WARMUP', 20, 0));
  const rounds = Math.floor(envNumber('QL_BENCH_ROUNDS', 3, 2));
  const root = mkdtempSync(join(tmpdir(), 'ql-bench-journal-'));
  const filesystem = filesystemOf(root);
  console.log(
    `journal bench: ${runs} runs (${runs * 7} steps) per sample after ${warmup}, ${rounds} rounds, ` +
      `${filesystem} at ${tmpdir()}; load ${machine.loadAvgAtStart}`,
  );
  const samples: Record<JournalVariant, JournalSample[]> = { legacy: [], every: [], log: [], ceiling: [] };
  try {
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < VARIANTS.length; i++) {
        const variant = VARIANTS[(round + i) % VARIANTS.length]!;
        const s = await runSample(variant, root, runs, warmup);
        samples[variant].push(s);
        console.log(
          `  round ${round + 1} ${variant}: ${s.stepsPerSecond.toFixed(0)} steps/s, ${s.cpuUsPerStep.toFixed(0)} µs CPU/step`,
        );
      }
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }

  const med = (variant: JournalVariant, key: keyof Omit<JournalSample, 'variant'>) =>
    median(samples[variant].map((s) => s[key]));
  const rate = (v: JournalVariant) => med(v, 'stepsPerSecond');
  const cpu = (v: JournalVariant) => med(v, 'cpuUsPerStep');
  const rows = VARIANTS.map((v) => [
    LABEL[v],
    rate(v).toFixed(0),
    (rate(v) / rate('ceiling')).toFixed(2),
    cpu(v).toFixed(0),
    med(v, 'userUsPerStep').toFixed(0),
    med(v, 'systemUsPerStep').toFixed(0),
    (cpu(v) / cpu('ceiling')).toFixed(2),
    med(v, 'stepMsP50').toFixed(2),
    med(v, 'stepMsP99').toFixed(2),
  ]);
  const header = [
    'variant',
    'steps/s',
    '÷ ceiling',
    'CPU µs/step',
    'user',
    'system',
    '÷ ceiling',
    'step ms p50',
    'p99',
  ];
  const align: Align[] = ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right'];
  const ratios = [
    ['steps/s, now ÷ ADR 0023', (rate('log') / rate('legacy')).toFixed(2)],
    ['CPU per step, now ÷ ADR 0023', (cpu('log') / cpu('legacy')).toFixed(2)],
    ['steps/s, now ÷ ADR 0041 (every step synced)', (rate('log') / rate('every')).toFixed(2)],
    ['step wall ms p50, now ÷ ADR 0041', (med('log', 'stepMsP50') / med('every', 'stepMsP50')).toFixed(2)],
    ['steps/s, now ÷ ceiling', (rate('log') / rate('ceiling')).toFixed(2)],
    ['CPU per step, now ÷ ceiling', (cpu('log') / cpu('ceiling')).toFixed(2)],
    [
      'CPU per run (7 steps), ADR 0023 → ADR 0041 → now (ms)',
      `${((7 * cpu('legacy')) / 1000).toFixed(2)} → ${((7 * cpu('every')) / 1000).toFixed(2)} → ${((7 * cpu('log')) / 1000).toFixed(2)}`,
    ],
  ];
  console.log(textTable(header, rows, align));
  console.log(textTable(['ratio', 'value'], ratios, ['left', 'right']));

  writeResults(resultsDir, 'journal', started, { machine, filesystem, runs, warmup, rounds, samples }, [
    `# The worker's journal: one step (ADR 0041, 0043), ${started.toISOString()}`,
    '',
    `Machine: ${machine.cpuCount} CPUs, node ${machine.node}, 1-min load ${machine.loadAvgAtStart} at start; ` +
      `journal folders on ${filesystem}.`,
    '',
    `Each sample: a fresh \`node ${WORKER_NODE_FLAGS.join(' ')}\` process drives ${runs} runs × 7 steps ` +
      `(accept, starting_acknowledged, launching, started, running_acknowledged, update(exit, outcome), ` +
      `completion_acknowledged; 64 records kept, as the worker's default) after ${warmup} runs not counted. ` +
      `Variants interleaved, order rotating, median of ${rounds} rounds. CPU is user + system of the whole ` +
      'process (the thread pool included); "step ms" is the wall time of one step, which for the log and ' +
      'the ceiling is how long the event loop waits. The machine is shared: read the ratios.',
    '',
    markdownTable(header, rows, align),
    '',
    markdownTable(['ratio', 'value'], ratios, ['left', 'right']),
    '',
  ]);
}
