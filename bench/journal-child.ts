/**
 * One sample of the `journal` bench (bench/journal.ts starts it with the worker's V8 flags):
 * `node <flags> journal-child.js <variant> <folder> <runs> <warmup runs>` drives `runs` runs through
 * the seven durable steps a run makes (accept, `starting_acknowledged`, `launching`, `started`,
 * `running_acknowledged`, `update(exit, outcome)`, `completion_acknowledged`), after `warmup` runs
 * not counted, and prints one JSON line, a `JournalSample`.
 *
 * - `legacy`: the per-record files of before ADR 0041 (bench/journal-legacy.ts);
 * - `log`: the journal as the worker has it (`WorkerJournal`: its log, lock, retention, compaction);
 * - `ceiling`: the same frames the log writes for those steps, each one `writeSync` at the end of one
 *   file, plus `fdatasyncSync` where the log syncs (`DURABLE_STATES` and the outcome, ADR 0043), and
 *   nothing else: no record built, checked or kept;
 * - `every`: the same frames, each with its own `fdatasyncSync` — the rule of ADR 0041, every step
 *   durable when it returns.
 */
import { fdatasyncSync, mkdirSync, openSync, readdirSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { LOG_FILE } from '../apps/worker/src/journal/journal-log';
import { LOG_HEADER_BYTES, encodeFrame } from '../apps/worker/src/journal/journal-log-format';
import { JournalRecord, acceptedRecord } from '../apps/worker/src/journal/journal-record';
import { JOURNAL_LIMITS, JournalState } from '../apps/worker/src/journal/journal-states';
import { DURABLE_STATES, WorkerJournal } from '../apps/worker/src/journal/worker-journal';
import { newOffer } from '../apps/worker/test-support/journal-fixtures';
import { LegacyJournal } from './journal-legacy';

export const JOURNAL_VARIANTS = ['legacy', 'log', 'ceiling', 'every'] as const;
export type JournalVariant = (typeof JOURNAL_VARIANTS)[number];

export interface JournalSample {
  readonly variant: JournalVariant;
  readonly steps: number;
  readonly seconds: number;
  readonly stepsPerSecond: number;
  /** CPU (user + system, every thread of the process: the thread pool too) per step, counted window. */
  readonly cpuUsPerStep: number;
  readonly userUsPerStep: number;
  readonly systemUsPerStep: number;
  /** Wall time from a step's call to its result: for `log` and `ceiling` the event loop is blocked that long. */
  readonly stepMsP50: number;
  readonly stepMsP99: number;
  readonly stepMsMax: number;
  /** Bytes in the folder's files at the end (the log after its compactions; the legacy records). */
  readonly bytesAtEnd: number;
}

const STEPS_PER_RUN = 7;
const outcome = { status: 'succeeded', exitCode: 0, errorCode: null } as const;
const offer = () => newOffer('c'.repeat(64));

/** The steps one run makes, for a journal with the worker's step methods. */
type Stepper = Pick<WorkerJournal, 'accept' | 'transition' | 'update'>;
function runSteps(journal: Stepper, pid: number): (() => Promise<unknown>)[] {
  const o = offer();
  const to =
    (state: JournalState, patch = {}) =>
    () =>
      journal.transition(o.offerId, state, patch);
  return [
    () => journal.accept(o),
    to('starting_acknowledged'),
    to('launching'),
    to('started', { process: { pid, pgid: pid, bootId: null } }),
    to('running_acknowledged'),
    () => journal.update(o.offerId, { exit: { code: 0, signal: null }, outcome }),
    to('completion_acknowledged'),
  ];
}

/** The frames the log writes for one run's steps (each a whole record, as the log holds it). */
function runFrames(pid: number): { frame: Buffer; durable: boolean }[] {
  let r = acceptedRecord(offer(), new Date().toISOString());
  const frames = [{ frame: encodeFrame({ put: r, lazy: true }), durable: false }];
  const step = (patch: Partial<JournalRecord>, durable = DURABLE_STATES.has(patch.state ?? r.state)) => {
    r = { ...r, ...patch };
    frames.push({ frame: encodeFrame(durable ? { put: r } : { put: r, lazy: true }), durable });
  };
  step({ state: 'starting_acknowledged' });
  step({ state: 'launching' });
  step({ state: 'started', process: { pid, pgid: pid, bootId: null } });
  step({ state: 'running_acknowledged' });
  step({ exit: { code: 0, signal: null }, outcome }, true);
  step({ state: 'completion_acknowledged', leaseToken: null });
  return frames;
}

async function timeSteps(
  steps: readonly (() => unknown)[],
  warmupSteps: number,
): Promise<{ seconds: number; cpu: NodeJS.CpuUsage; stepMs: number[] }> {
  for (const step of steps.slice(0, warmupSteps)) await step();
  const counted = steps.slice(warmupSteps);
  const stepMs: number[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (const step of counted) {
    const s = performance.now();
    await step();
    stepMs.push(performance.now() - s);
  }
  const seconds = (performance.now() - t0) / 1000;
  return { seconds, cpu: process.cpuUsage(cpu0), stepMs };
}

async function sample(
  variant: JournalVariant,
  dir: string,
  runs: number,
  warmup: number,
): Promise<JournalSample> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const all = runs + warmup;
  let measured: Awaited<ReturnType<typeof timeSteps>>;
  let bytesAtEnd: number;
  if (variant === 'ceiling' || variant === 'every') {
    const frames = Array.from({ length: all }, (_, i) => runFrames(1000 + i)).flat();
    const fd = openSync(join(dir, LOG_FILE), 'w+', 0o600);
    writeSync(fd, LOG_HEADER_BYTES);
    let at = LOG_HEADER_BYTES.length;
    const steps = frames.map(({ frame, durable }) => () => {
      writeSync(fd, frame, 0, frame.length, at);
      if (durable || variant === 'every') fdatasyncSync(fd);
      at += frame.length;
    });
    measured = await timeSteps(steps, warmup * STEPS_PER_RUN);
    bytesAtEnd = at;
  } else {
    const journal =
      variant === 'log'
        ? new WorkerJournal({ dir, workerId: 'bench', maxRecords: JOURNAL_LIMITS.defaultRecords })
        : new LegacyJournal(dir, JOURNAL_LIMITS.defaultRecords);
    await journal.open();
    const steps = Array.from({ length: all }, (_, i) => runSteps(journal, 1000 + i)).flat();
    measured = await timeSteps(steps, warmup * STEPS_PER_RUN);
    await new Promise((done) => setImmediate(done)); // a compaction the last step asked for
    bytesAtEnd = readdirSync(dir)
      .filter((name) => name === LOG_FILE || name.endsWith('.json'))
      .reduce((sum, name) => sum + statSync(join(dir, name)).size, 0);
    if (journal instanceof WorkerJournal) await journal.close();
  }
  const steps = measured.stepMs.length;
  const sorted = [...measured.stepMs].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return {
    variant,
    steps,
    seconds: measured.seconds,
    stepsPerSecond: steps / measured.seconds,
    cpuUsPerStep: (measured.cpu.user + measured.cpu.system) / steps,
    userUsPerStep: measured.cpu.user / steps,
    systemUsPerStep: measured.cpu.system / steps,
    stepMsP50: at(0.5),
    stepMsP99: at(0.99),
    stepMsMax: sorted.at(-1)!,
    bytesAtEnd,
  };
}

if (require.main === module) {
  const [variant, dir, runs, warmup] = process.argv.slice(2);
  if (!JOURNAL_VARIANTS.includes(variant as JournalVariant)) throw new Error(`unknown variant ${variant}`);
  sample(variant as JournalVariant, dir!, Number(runs), Number(warmup)).then(
    (result) => console.log(JSON.stringify(result)),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
