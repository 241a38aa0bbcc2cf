import { createIdGenerator } from '@ql/contracts';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PATH_TO } from '../../test-support/journal-fixtures';
import type { JournalState } from '../journal/journal-states';
import { WorkerJournal } from '../journal/worker-journal';
import type { LogFields, WorkerLog } from '../logging/worker-log';
import { LocalProcessExecutor } from './local-process.executor';
import { WorkFolders } from './work-folders';

const ids = createIdGenerator();
let root: string;
let journal: WorkerJournal;
const lines: { level: string; msg: string; fields?: LogFields }[] = [];
const log: WorkerLog = {
  debug: (msg, fields) => lines.push({ level: 'debug', msg, fields }),
  info: (msg, fields) => lines.push({ level: 'info', msg, fields }),
  warn: (msg, fields) => lines.push({ level: 'warn', msg, fields }),
  error: (msg, fields) => lines.push({ level: 'error', msg, fields }),
};
beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'ql-work-folders-'));
  journal = new WorkerJournal({ dir: join(root, 'journal'), workerId: 'worker-1', maxRecords: 64 });
  await journal.open();
  lines.length = 0;
});
afterEach(async () => {
  await journal.close();
  rmSync(root, { recursive: true, force: true });
});

const workRoot = () => join(root, 'runs');
/** A real journal record driven to `state` (a completion with `status`) and a work folder with a file. */
async function attempt(state: JournalState, status: 'succeeded' | 'failed' = 'succeeded'): Promise<string> {
  const offerId = ids.uuidV7();
  await journal.accept({
    offerId,
    runId: ids.uuidV7(),
    attemptId: ids.uuidV7(),
    leaseGeneration: 1,
    leaseToken: randomBytes(32).toString('base64url'),
    specDigest: 'a'.repeat(64),
  });
  for (const to of PATH_TO[state]) {
    await journal.transition(offerId, to, {
      ...(to === 'started' ? { process: { pid: 4242, pgid: 4242, bootId: 'boot-1' } } : {}),
      ...(to === 'completion_acknowledged'
        ? { outcome: { status, exitCode: status === 'succeeded' ? 0 : 1, errorCode: null } }
        : {}),
      ...(to === 'recovery_required' ? { recoveryReason: 'launch_interrupted' } : {}),
    });
  }
  mkdirSync(join(workRoot(), offerId, 'sub'), { recursive: true });
  writeFileSync(join(workRoot(), offerId, 'sub', 'f'), 'x');
  return offerId;
}
const folders = (keepFailedRuns = 5) =>
  new WorkFolders({ root: workRoot(), keepFailedRuns, keepFailedBytes: 1 << 20 }, log);

describe('WorkFolders (ADR 0038)', () => {
  it('removes only what the journal calls finished: an unfinished attempt keeps its folder, and the executor still refuses to launch it again', async () => {
    const going = await attempt('running_acknowledged');
    const interrupted = await attempt('recovery_required');
    const launching = await attempt('launching');
    const done = await attempt('completion_acknowledged');
    for (const offerId of [going, interrupted, launching, done]) await folders(0).settle(journal, offerId);

    expect(readdirSync(workRoot()).sort()).toEqual([going, interrupted, launching].sort());
    const executor = new LocalProcessExecutor({
      workRoot: workRoot(),
      killGraceMs: 500,
      outputCapBytes: 4096,
    });
    await expect(
      executor.launch({
        offerId: launching,
        attemptId: ids.uuidV7(),
        runtime: 'shell',
        command: 'true',
        env: {},
        timeoutMs: 5000,
      }),
    ).rejects.toMatchObject({ code: 'work_dir_exists' });
    expect(lines.filter((l) => l.level !== 'debug')).toEqual([]);
  });

  it('keeps failed and start-failed folders within the count; a succeeded one goes at once', async () => {
    const failed = await attempt('completion_acknowledged', 'failed');
    const startFailed = await attempt('start_failed');
    await folders(2).settle(journal, failed);
    await folders(2).settle(journal, startFailed);
    expect(existsSync(join(workRoot(), failed))).toBe(true);
    expect(existsSync(join(workRoot(), startFailed))).toBe(true);
    const ok = await attempt('completion_acknowledged');
    await folders(2).settle(journal, ok);
    expect(existsSync(join(workRoot(), ok))).toBe(false);
  });
});
