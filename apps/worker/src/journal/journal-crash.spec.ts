import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { APPENDER_LIMITS } from '../../test-support/journal-appender';
import { PATH_TO } from '../../test-support/journal-fixtures';
import { JournalState, isFinished } from './journal-states';
import { WorkerJournal } from './worker-journal';

const REGISTER = resolve(__dirname, '../../test-support/swc-register.js');
const APPENDER = resolve(__dirname, '../../test-support/journal-appender.ts');

// Real child processes, each compiling the journal with SWC on a shared machine.
jest.setTimeout(180_000);

let root: string;
beforeEach(() => (root = mkdtempSync(join(tmpdir(), 'ql-journal-crash-'))));
afterEach(() => rmSync(root, { recursive: true, force: true }));

const RUN: readonly JournalState[] = ['accepted', ...PATH_TO.completion_acknowledged];
const after = (state: JournalState) => RUN[RUN.indexOf(state) + 1];

/** Starts the appender on `dir`, SIGKILLs it once it counted `runs` runs; its acks, in order. */
async function appendThenKill(dir: string, ackFile: string, runs: number): Promise<[string, JournalState][]> {
  const child = spawn(process.execPath, ['-r', REGISTER, APPENDER, dir, ackFile], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  for await (const line of createInterface({ input: child.stdout })) {
    if (Number(line) >= runs) break;
  }
  child.kill('SIGKILL');
  const [code, signal] = (await exited) as [number | null, string | null];
  expect({ code, signal }).toEqual({ code: null, signal: 'SIGKILL' }); // killed mid-loop, not ended
  const text = readFileSync(ackFile, 'utf8');
  return text
    .slice(0, text.lastIndexOf('\n') + 1) // a line the kill cut short was not acknowledged
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' ') as [string, JournalState]);
}

describe('the journal survives SIGKILL in a loop of appends (ADR 0041)', () => {
  it('no acknowledged step is lost and nothing torn is read, kill after kill on one journal', async () => {
    const dir = join(root, 'journal');
    /** What the journal must hold: every offer's last acknowledged state (finished ones may be pruned). */
    const model = new Map<string, JournalState>();
    const kills = [3, 9, 1, 14, 5, 22, 2, 11];
    for (const [round, runs] of kills.entries()) {
      const acks = await appendThenKill(dir, join(root, `acks-${round}`), runs);
      expect(acks.length).toBeGreaterThanOrEqual(runs * RUN.length);
      for (const [offerId, state] of acks) model.set(offerId, state);
      const [lastOffer, lastState] = acks.at(-1)!;

      const journal = new WorkerJournal({ dir, workerId: 'checker', ...APPENDER_LIMITS });
      await journal.open(); // a torn or corrupt frame would be refused or left out here, never read
      const found = new Map<string, JournalState>();
      for await (const page of journal.pages()) for (const r of page) found.set(r.offerId, r.state);
      await journal.close();

      expect(found.size).toBeLessThanOrEqual(APPENDER_LIMITS.maxRecords);
      // The step after the last acknowledgement may have landed (written, not yet acknowledged).
      const inFlight = [...found].filter(([offerId]) => !model.has(offerId));
      if (isFinished(lastState)) {
        expect(inFlight.map(([, state]) => state)).toEqual(inFlight.length ? ['accepted'] : []);
      } else {
        expect(inFlight).toEqual([]);
        expect([lastState, after(lastState)]).toContain(found.get(lastOffer));
      }
      for (const [offerId, state] of model) {
        if (!found.has(offerId) || (offerId === lastOffer && !isFinished(lastState))) continue;
        expect({ offerId, state: found.get(offerId) }).toEqual({ offerId, state });
      }
      // Only retention removes records: finished ones, oldest first, down to the bound.
      const known = [...model.keys()];
      const finished = known.filter((offerId) => isFinished(model.get(offerId)!));
      const kept = finished.filter((offerId) => found.has(offerId));
      expect(kept).toEqual(finished.slice(finished.length - kept.length));
      expect(known.filter((offerId) => !isFinished(model.get(offerId)!) && !found.has(offerId))).toEqual([]);
      expect(found.size).toBe(Math.min(APPENDER_LIMITS.maxRecords, known.length + inFlight.length));
      // What the journal holds now is what the next round starts from.
      model.clear();
      for (const [offerId, state] of found) model.set(offerId, state);
    }
  });
});
