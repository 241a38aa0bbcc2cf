import { createIdGenerator } from '@ql/contracts';
import { IllegalStateError } from '@ql/domain';
import fs, {
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LOG_FILE, readJournalLog } from './journal-log';
import { JournalCorruptError, JournalRecord } from './journal-record';
import { JournalState } from './journal-states';
import { RestartAction, WORKER_RESTARTED } from './restart-action';
import { RestartScan } from './restart-scan';
import { JournalFullError, WorkerJournal } from './worker-journal';
import { DRIVEN_PROCESS, SUCCEEDED, driveNewRecord, newOffer } from '../../test-support/journal-fixtures';

const ids = createIdGenerator();
let root: string;
beforeEach(() => (root = mkdtempSync(join(tmpdir(), 'ql-journal-'))));
afterEach(() => rmSync(root, { recursive: true, force: true }));

const offer = () => newOffer();
const proc = DRIVEN_PROCESS;
const outcome = SUCCEEDED;

async function opened(dir = join(root, 'journal'), maxRecords = 64): Promise<WorkerJournal> {
  const journal = new WorkerJournal({ dir, workerId: 'worker-1', maxRecords });
  await journal.open();
  return journal;
}

/** Drives a fresh record along the table to `state`, through real writes; `exited`: the process ended. */
async function driveTo(journal: WorkerJournal, state: JournalState, exited = false): Promise<JournalRecord> {
  const r = await driveNewRecord(journal, state);
  return exited ? journal.update(r.offerId, { exit: { code: 0, signal: null }, outcome }) : r;
}

const mode = (path: string) => statSync(path).mode & 0o777;

/** The next write lands 40 bytes of its frame, then fails with `code` (a disk filling up, an I/O error). */
function failNextWriteHalfWay(code: 'ENOSPC' | 'EIO') {
  const realWrite = fs.writeSync as (fd: number, b: Buffer, off: number, len: number, pos: number) => number;
  const message = code === 'ENOSPC' ? 'ENOSPC: no space left on device, write' : 'EIO: i/o error, write';
  return jest.spyOn(fs, 'writeSync').mockImplementationOnce(((
    fd: number,
    b: Buffer,
    off: number,
    _len: number,
    pos: number,
  ) => {
    realWrite(fd, b, off, 40, pos);
    throw Object.assign(new Error(message), { code });
  }) as unknown as typeof fs.writeSync);
}

describe('WorkerJournal storage (R-WRK-2)', () => {
  it('touches nothing until open(), then keeps its records in one 0600 log in a 0700 folder with no temp file left', async () => {
    const dir = join(root, 'worker', 'journal');
    const journal = new WorkerJournal({ dir, workerId: 'worker-1', maxRecords: 64 });
    expect(existsSync(join(root, 'worker'))).toBe(false);
    await journal.open();
    const r = await driveTo(journal, 'started');
    expect(mode(dir)).toBe(0o700);
    expect(mode(join(root, 'worker'))).toBe(0o700);
    expect(readdirSync(dir).sort()).toEqual([LOG_FILE, 'journal.lock', 'journal.lock.sqlite'].sort());
    expect(mode(join(dir, LOG_FILE))).toBe(0o600);
    expect(mode(join(dir, 'journal.lock'))).toBe(0o600);
    expect(mode(join(dir, 'journal.lock.sqlite'))).toBe(0o600);
    expect(readJournalLog(dir)).toEqual([
      expect.objectContaining({ state: 'started', process: proc, runId: r.runId, leaseGeneration: 1 }),
    ]);
    await journal.close();
    expect(readdirSync(dir).sort()).toEqual([LOG_FILE, 'journal.lock.sqlite'].sort()); // the kernel lock file stays (ADR 0029)
  });

  it('refuses a folder others can read, and a journal used before open()', async () => {
    const dir = join(root, 'open');
    await mkdir(dir);
    await chmod(dir, 0o755);
    await expect(opened(dir)).rejects.toThrow(/mode 755; it holds lease tokens and must be 0700/);
    expect(readdirSync(dir)).toEqual([]);
    const closed = new WorkerJournal({ dir, workerId: 'worker-1', maxRecords: 64 });
    await expect(closed.accept(offer())).rejects.toThrow(/not open/);
    expect(() => new WorkerJournal({ dir, workerId: 'w', maxRecords: 1025 })).toThrow(/1\.\.1024/);
  });

  it('rejects an illegal step and a step missing what its state needs, and writes nothing', async () => {
    const journal = await opened();
    const r = await driveTo(journal, 'launching');
    const file = join(journal.dir, LOG_FILE);
    const before = readFileSync(file, 'utf8');
    await expect(journal.transition(r.offerId, 'completion_acknowledged', { outcome })).rejects.toThrow(
      IllegalStateError,
    );
    await expect(journal.transition(r.offerId, 'launching')).rejects.toThrow(/launching → launching/);
    await expect(journal.transition(r.offerId, 'started')).rejects.toThrow(/process: required_in_state/);
    await expect(journal.transition(r.offerId, 'recovery_required')).rejects.toThrow(/recoveryReason/);
    expect(readFileSync(file, 'utf8')).toBe(before);
    await expect(journal.accept({ ...offer(), offerId: r.offerId })).rejects.toThrow(/already journaled/);
    expect(readFileSync(file, 'utf8')).toBe(before);
    await journal.close();
  });

  it('the operator resolves a recovery_required record only: any other or unknown record is refused and nothing changes (ADR 0029)', async () => {
    const journal = await opened();
    const live = await driveTo(journal, 'running_acknowledged');
    const stuck = await driveTo(journal, 'recovery_required');
    const log = join(journal.dir, LOG_FILE);
    const before = readFileSync(log, 'utf8');
    await expect(journal.resolveRecovery(live.offerId)).rejects.toThrow(
      new RegExp(`offer ${live.offerId} is running_acknowledged, not recovery_required`),
    );
    await expect(journal.resolveRecovery(ids.uuidV7())).rejects.toThrow(/is not in the journal/);
    expect(readFileSync(log, 'utf8')).toBe(before);
    expect(journal.countInState('recovery_required')).toBe(1);
    await expect(journal.resolveRecovery(stuck.offerId)).resolves.toMatchObject({ offerId: stuck.offerId });
    expect(readJournalLog(journal.dir).map((x) => x.offerId)).toEqual([live.offerId]);
    expect(await journal.get(stuck.offerId)).toBeNull();
    expect(journal.countInState('recovery_required')).toBe(0);
    await journal.close();
  });

  it('keeps the lease token while it matters and drops it once the record is finished', async () => {
    const journal = await opened();
    const live = await driveTo(journal, 'running_acknowledged');
    expect(live.leaseToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const done = await journal.transition(live.offerId, 'completion_acknowledged', { outcome });
    expect(done.leaseToken).toBeNull();
    expect(readJournalLog(journal.dir)).toEqual([done]);
    await journal.close();
    // The superseded frames still hold it until the log is compacted: at the next open at the latest.
    await (await opened(journal.dir)).close();
    expect(readFileSync(join(journal.dir, LOG_FILE), 'utf8')).not.toContain(live.leaseToken!);
  });

  it('prunes finished records oldest first beyond the limit and refuses a journal full of live runs', async () => {
    let t = Date.parse('2026-01-01T00:00:00.000Z');
    const journal = new WorkerJournal({
      dir: join(root, 'j'),
      workerId: 'worker-1',
      maxRecords: 3,
      now: () => new Date((t += 1000)),
    });
    await journal.open();
    const finished = [];
    for (let i = 0; i < 4; i++) finished.push(await driveTo(journal, 'start_failed'));
    // Only 3 records are kept: the oldest finished one went first.
    expect(journal.size).toBe(3);
    expect(await journal.get(finished[0]!.offerId)).toBeNull();
    const live = [await driveTo(journal, 'accepted'), await driveTo(journal, 'started')];
    expect(await journal.get(finished[1]!.offerId)).toBeNull();
    expect(await journal.get(finished[2]!.offerId)).toBeNull();
    expect(await journal.get(finished[3]!.offerId)).not.toBeNull();
    await driveTo(journal, 'launching');
    await expect(journal.accept(offer())).rejects.toThrow(JournalFullError);
    await expect(journal.accept(offer())).rejects.toThrow(/holds 3 unfinished records/);
    expect(readJournalLog(journal.dir)).toHaveLength(3);
    expect(await journal.get(live[0]!.offerId)).not.toBeNull();
    await journal.close();
  });

  it('removes a temp file a crash left behind and stops on a corrupt record file of an older worker', async () => {
    const journal = await opened();
    const r = await driveTo(journal, 'accepted');
    await journal.close();
    writeFileSync(join(journal.dir, '.tmp-0123456789abcdef'), '{"half":');
    const again = await opened(journal.dir);
    expect(again.size).toBe(1);
    expect(readdirSync(journal.dir).some((n) => n.startsWith('.tmp-'))).toBe(false);
    await again.close();
    const log = readFileSync(join(journal.dir, LOG_FILE));
    writeFileSync(join(journal.dir, `${r.offerId}.json`), '{"schema":"qinglong/worker-journal-record@v1"');
    await expect(opened(journal.dir)).rejects.toThrow(JournalCorruptError);
    await expect(opened(journal.dir)).rejects.toThrow(`journal record ${r.offerId}.json is unreadable`);
    expect(existsSync(join(journal.dir, 'journal.lock'))).toBe(false);
    expect(readFileSync(join(journal.dir, LOG_FILE)).equals(log)).toBe(true); // refused: nothing changed
  });
});

describe('WorkerJournal memory copy (ADR 0023)', () => {
  it('steps and reads start from what it last wrote, never from the folder again', async () => {
    const journal = await opened();
    const r = await driveTo(journal, 'launching');
    // Only the owner writes this folder; bytes put there behind its back are not read while it is open.
    const planted = join(journal.dir, `${r.offerId}.json`);
    writeFileSync(planted, '{"not":"a record"}');
    expect(await journal.get(r.offerId)).toEqual(r);
    expect((await journal.page(null)).records).toEqual([r]);
    const started = await journal.transition(r.offerId, 'started', { process: proc });
    expect(started).toMatchObject({ state: 'started', leaseToken: r.leaseToken, runId: r.runId });
    // The step wrote the whole record, durably, from the memory copy.
    expect(readJournalLog(journal.dir)).toEqual([started]);
    const exited = await journal.update(r.offerId, { exit: { code: 0, signal: null }, outcome });
    expect(readJournalLog(journal.dir)).toEqual([exited]);
    expect(() => ((exited as { state: string }).state = 'accepted')).toThrow(TypeError);
    expect(() => ((exited.outcome as { status: string }).status = 'failed')).toThrow(TypeError);
    await journal.close();
    rmSync(planted);
    const again = await opened(journal.dir);
    expect(await again.get(r.offerId)).toEqual(exited);
    await again.close();
  });

  it('keeps the old copy when a write fails half way, and cuts the half frame off the log', async () => {
    const journal = await opened();
    const r = await driveTo(journal, 'starting_acknowledged');
    const log = join(journal.dir, LOG_FILE);
    const before = readFileSync(log);
    // The disk fills up in the middle of the frame: some bytes land, then ENOSPC.
    const write = failNextWriteHalfWay('ENOSPC');
    try {
      await expect(journal.transition(r.offerId, 'launching')).rejects.toThrow(/ENOSPC/);
    } finally {
      write.mockRestore();
    }
    expect(readFileSync(log).equals(before)).toBe(true);
    expect(await journal.get(r.offerId)).toEqual(r);
    await expect(journal.transition(r.offerId, 'started', { process: proc })).rejects.toThrow(
      /starting_acknowledged → started/,
    );
    const launching = await journal.transition(r.offerId, 'launching');
    expect(readJournalLog(journal.dir)).toEqual([launching]);
    await journal.close();
    const again = await opened(journal.dir);
    expect(await again.get(r.offerId)).toEqual(launching);
    await again.close();
  });

  it('refuses every write once a failed one could not be undone; the next open drops the half frame', async () => {
    const journal = await opened();
    const r = await driveTo(journal, 'starting_acknowledged');
    const write = failNextWriteHalfWay('EIO');
    const truncate = jest.spyOn(fs, 'ftruncateSync').mockImplementationOnce(() => {
      throw Object.assign(new Error('EIO: i/o error, ftruncate'), { code: 'EIO' });
    });
    try {
      await expect(journal.transition(r.offerId, 'launching')).rejects.toThrow(/EIO/);
    } finally {
      write.mockRestore();
      truncate.mockRestore();
    }
    await expect(journal.transition(r.offerId, 'launching')).rejects.toThrow(
      /a failed write \(Error: EIO: i\/o error, write\) could not be undone .*; reopen the journal/,
    );
    await expect(journal.accept(offer())).rejects.toThrow(/could not be undone/);
    expect(await journal.get(r.offerId)).toEqual(r);
    await journal.close();
    const again = await opened(journal.dir);
    expect(await again.get(r.offerId)).toEqual(r);
    await expect(again.transition(r.offerId, 'launching')).resolves.toMatchObject({ state: 'launching' });
    await again.close();
  });

  it('every step is one write and no more, an accept that prunes and the last step of a run included (ADR 0041, 0043)', async () => {
    const journal = await opened(join(root, 'full'), 2);
    const old = [await driveTo(journal, 'start_failed'), await driveTo(journal, 'start_failed')];
    const calls = [
      'writeSync',
      'fdatasyncSync',
      'fsyncSync',
      'openSync',
      'renameSync',
      'unlinkSync',
    ] as const;
    const spies = calls.map((name) => jest.spyOn(fs, name));
    const counts = () => Object.fromEntries(calls.map((name, i) => [name, spies[i]!.mock.calls.length]));
    // These steps are lazy (ADR 0043): no fdatasync of their own.
    const one = { writeSync: 1, fdatasyncSync: 0, fsyncSync: 0, openSync: 0, renameSync: 0, unlinkSync: 0 };
    try {
      const fresh = await journal.accept(offer());
      expect(counts()).toEqual(one);
      expect(await journal.get(old[0]!.offerId)).toBeNull();
      expect(
        readJournalLog(journal.dir)
          .map((r) => r.offerId)
          .sort(),
      ).toEqual([old[1]!.offerId, fresh.offerId].sort());
      for (const spy of spies) spy.mockClear();
      await journal.transition(fresh.offerId, 'starting_acknowledged');
      expect(counts()).toEqual(one);
      for (const spy of spies) spy.mockClear();
      await journal.transition(fresh.offerId, 'start_failed');
      expect(counts()).toEqual(one);
      for (const spy of spies) spy.mockClear();
      expect(await journal.prune(1)).toBe(1);
      expect(counts()).toEqual(one);
      for (const spy of spies) spy.mockClear();
      expect(await journal.prune(1)).toBe(0); // nothing to remove: nothing written
      expect(counts()).toEqual({ ...one, writeSync: 0, fdatasyncSync: 0 });
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
    await journal.close();
  });
});

describe('restart scan (R-WRK-1, R-WRK-2)', () => {
  it('reads pages of at most 64 and hands out at most 16 records per tick, in offer order', async () => {
    const journal = await opened(join(root, 'many'), 80);
    const made: string[] = [];
    for (let i = 0; i < 70; i++) made.push((await journal.accept(offer())).offerId);
    const pages: number[] = [];
    for await (const page of journal.pages()) pages.push(page.length);
    expect(pages).toEqual([64, 6]);
    await expect(journal.page(null, 65)).rejects.toThrow(/1\.\.64/);
    const scan = new RestartScan(journal);
    const seen: string[] = [];
    const ticks: number[] = [];
    while (!scan.done) {
      const items = await scan.tick();
      ticks.push(items.length);
      seen.push(...items.map((i) => i.record.offerId));
    }
    expect(ticks).toEqual([16, 16, 16, 16, 6]);
    expect(seen).toEqual(made);
    expect(scan.stopPulling).toBe(false);
    expect(() => new RestartScan(journal, 64, 17)).toThrow(/1\.\.16/);
    await journal.close();
  });

  const failed = { status: 'failed', exitCode: null, errorCode: WORKER_RESTARTED } as const;
  it.each<[JournalState, boolean, RestartAction, boolean]>([
    ['accepted', false, { kind: 'release' }, false],
    [
      'starting_acknowledged',
      false,
      { kind: 'report_start_failure', killGroup: null, errorCode: WORKER_RESTARTED },
      false,
    ],
    ['launching', false, { kind: 'mark_recovery_required', reason: 'launch_interrupted' }, true],
    ['started', false, { kind: 'report_start_failure', killGroup: proc, errorCode: WORKER_RESTARTED }, false],
    ['started', true, { kind: 'report_start_failure', killGroup: null, errorCode: WORKER_RESTARTED }, false],
    ['running_acknowledged', false, { kind: 'report_completion', killGroup: proc, outcome: failed }, false],
    ['running_acknowledged', true, { kind: 'report_completion', killGroup: null, outcome }, false],
    ['completion_acknowledged', false, { kind: 'prune' }, false],
    ['start_failed', false, { kind: 'prune' }, false],
    ['recovery_required', false, { kind: 'stop_pulling', reason: 'launch_interrupted' }, true],
  ])('a record left in %s (process exited: %s) after a crash → %o', async (state, exited, action, stop) => {
    const dir = join(root, 'crash');
    const before = await opened(dir);
    await driveTo(before, 'accepted'); // a neighbour that must not change the verdict
    const r = await driveTo(before, state, exited);
    await before.close(); // the predecessor is gone; its records stay
    const after = await opened(dir);
    const scan = new RestartScan(after);
    const items = await scan.tick();
    expect(scan.done).toBe(true);
    expect(items.find((i) => i.record.offerId === r.offerId)?.action).toEqual(action);
    expect(items.find((i) => i.record.offerId !== r.offerId)?.action).toEqual({ kind: 'release' });
    expect(scan.stopPulling).toBe(stop);
    await after.close();
  });
});
