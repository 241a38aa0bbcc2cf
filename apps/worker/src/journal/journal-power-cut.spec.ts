import fs, { chmodSync, cpSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DRIVEN_PROCESS, SUCCEEDED, newOffer } from '../../test-support/journal-fixtures';
import { LOG_FILE } from './journal-log';
import { LOG_HEADER } from './journal-log-format';
import type { JournalRecord } from './journal-record';
import type { JournalState } from './journal-states';
import { restartAction } from './restart-action';
import { WorkerJournal } from './worker-journal';

let root: string;
beforeEach(() => (root = mkdtempSync(join(tmpdir(), 'ql-journal-power-'))));
afterEach(() => rmSync(root, { recursive: true, force: true }));

const LIMITS = { workerId: 'worker-1', maxRecords: 16 } as const;

/**
 * What a power cut can leave of a log (ADR 0043): every frame up to the last durable one (its
 * fdatasync covered them all), then the lazy frames after it lost — the worst case: the first one
 * damaged and the later ones whole (write-back need not keep the order of pages).
 */
function powerCut(log: Buffer): Buffer {
  const lines = log.toString('utf8').slice(LOG_HEADER.length).split('\n').slice(0, -1);
  let durable = 0;
  lines.forEach((line, i) => {
    if (!line.endsWith(',"lazy":true}')) durable = i + 1;
  });
  const kept = lines.slice(0, durable);
  const lost = lines.slice(durable);
  if (lost.length) lost[0] = lost[0]!.replace('"state":"', '"state":"#'); // checksum no longer matches
  return Buffer.from(LOG_HEADER + [...kept, ...lost].map((l) => `${l}\n`).join(''), 'utf8');
}

/** The record a journal opened on a power-cut copy of `dir` holds for `offerId` (null: none). */
async function afterPowerCut(dir: string, offerId: string, n: number): Promise<JournalRecord | null> {
  const copy = join(root, `cut-${n}`);
  cpSync(dir, copy, { recursive: true });
  // The folder a power cut leaves keeps its 0700; Node 22's cpSync makes the top folder 0755.
  chmodSync(copy, statSync(dir).mode & 0o777);
  rmSync(join(copy, 'journal.lock'), { force: true });
  writeFileSync(join(copy, LOG_FILE), powerCut(readFileSync(join(dir, LOG_FILE))));
  const journal = new WorkerJournal({ dir: copy, ...LIMITS });
  await journal.open();
  try {
    return await journal.get(offerId);
  } finally {
    await journal.close();
  }
}

type Step = readonly [string, (journal: WorkerJournal, id: string) => Promise<JournalRecord>];
const before: Step[] = [
  ['starting_acknowledged', (j, id) => j.transition(id, 'starting_acknowledged')],
  ['launching', (j, id) => j.transition(id, 'launching')],
  ['started', (j, id) => j.transition(id, 'started', { process: DRIVEN_PROCESS })],
];
const exit: Step = ['exit', (j, id) => j.update(id, { exit: { code: 0, signal: null }, outcome: SUCCEEDED })];
const done: Step = ['completion_acknowledged', (j, id) => j.transition(id, 'completion_acknowledged')];

/** The attempt runner's steps after the accept, in its order; after each one the power goes. */
async function cutAfterEachStep(steps: readonly Step[]) {
  const dir = join(root, 'journal');
  const journal = new WorkerJournal({ dir, ...LIMITS });
  await journal.open();
  const offer = newOffer();
  const id = offer.offerId;
  const all: Step[] = [['accept', (j) => j.accept(offer)], ...steps];
  const passed: JournalState[] = [];
  const seen: { step: string; recovered: JournalState | null; outcome: boolean; action: string }[] = [];
  for (const [n, [step, run]] of all.entries()) {
    passed.push((await run(journal, id)).state);
    const recovered = await afterPowerCut(dir, id, n);
    seen.push({
      step,
      recovered: recovered?.state ?? null,
      outcome: recovered?.outcome != null,
      action: recovered ? restartAction(recovered).kind : 'none',
    });
    // Only a suffix is ever lost: what is left is a state this run passed through.
    if (recovered) expect(passed).toContain(recovered.state);
  }
  await journal.close();
  return seen;
}

describe('a power cut after any step of a run (ADR 0043, R-WRK-2)', () => {
  it('never loses launching, started or the outcome; loses at most lazy steps, as a crash just before them would', async () => {
    const running: Step = ['running_acknowledged', (j, id) => j.transition(id, 'running_acknowledged')];
    const seen = await cutAfterEachStep([...before, running, exit, done]);
    expect(seen).toEqual([
      // Lost with the power: no process was spawned yet; the lease ends on the control plane.
      { step: 'accept', recovered: null, outcome: false, action: 'none' },
      { step: 'starting_acknowledged', recovered: null, outcome: false, action: 'none' },
      // Synced before the spawn: a run that may have started is never reported as not started.
      { step: 'launching', recovered: 'launching', outcome: false, action: 'mark_recovery_required' },
      { step: 'started', recovered: 'started', outcome: false, action: 'report_start_failure' },
      // Lost: reported as a start failure of the running attempt, which the control plane refuses;
      // its lease then ends there (as after a crash between the answer and the journal write).
      { step: 'running_acknowledged', recovered: 'started', outcome: false, action: 'report_start_failure' },
      // The outcome cannot be recomputed: synced, with the steps before it.
      { step: 'exit', recovered: 'running_acknowledged', outcome: true, action: 'report_completion' },
      // Lost: the completion is sent again and replayed or refused; either way the record is finished.
      {
        step: 'completion_acknowledged',
        recovered: 'running_acknowledged',
        outcome: true,
        action: 'report_completion',
      },
    ]);
  });

  it('a run that ended before its running report (ADR 0047): the outcome on `started` is durable, and a lost completion_acknowledged is reported again', async () => {
    const seen = await cutAfterEachStep([...before, exit, done]);
    expect(seen).toEqual([
      { step: 'accept', recovered: null, outcome: false, action: 'none' },
      { step: 'starting_acknowledged', recovered: null, outcome: false, action: 'none' },
      { step: 'launching', recovered: 'launching', outcome: false, action: 'mark_recovery_required' },
      { step: 'started', recovered: 'started', outcome: false, action: 'report_start_failure' },
      // The outcome, synced: the completion that stood in for `running` is reported (with its handle).
      { step: 'exit', recovered: 'started', outcome: true, action: 'report_completion' },
      // Lost: that completion is sent again and replayed or refused; either way the record is finished.
      { step: 'completion_acknowledged', recovered: 'started', outcome: true, action: 'report_completion' },
    ]);
  });

  it('a run is seven writes and three fdatasyncs: launching, started and the outcome (ADR 0043)', async () => {
    const journal = new WorkerJournal({ dir: join(root, 'run'), ...LIMITS });
    await journal.open();
    const write = jest.spyOn(fs, 'writeSync');
    const sync = jest.spyOn(fs, 'fdatasyncSync');
    const synced: Record<string, number> = {};
    const step = async (name: string, run: () => Promise<unknown>) => {
      sync.mockClear();
      await run();
      synced[name] = sync.mock.calls.length;
    };
    try {
      const r = await journal.accept(newOffer());
      synced.accept = sync.mock.calls.length;
      await step('starting_acknowledged', () => journal.transition(r.offerId, 'starting_acknowledged'));
      await step('launching', () => journal.transition(r.offerId, 'launching'));
      await step('started', () => journal.transition(r.offerId, 'started', { process: DRIVEN_PROCESS }));
      await step('running_acknowledged', () => journal.transition(r.offerId, 'running_acknowledged'));
      await step('exit', () =>
        journal.update(r.offerId, {
          exit: { code: 0, signal: null },
          outcome: SUCCEEDED,
        }),
      );
      await step('completion_acknowledged', () => journal.transition(r.offerId, 'completion_acknowledged'));
      expect(write).toHaveBeenCalledTimes(7);
    } finally {
      write.mockRestore();
      sync.mockRestore();
    }
    expect(synced).toEqual({
      accept: 0,
      starting_acknowledged: 0,
      launching: 1,
      started: 1,
      running_acknowledged: 0,
      exit: 1,
      completion_acknowledged: 0,
    });
    await journal.close();
  });
});
