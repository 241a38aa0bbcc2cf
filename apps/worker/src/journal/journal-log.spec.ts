import fs, {
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { crc32 } from 'node:zlib';
import { join } from 'node:path';
import { COMPACTION, JournalLog, LOG_FILE, readJournalLog } from './journal-log';
import { LOG_HEADER, encodeFrame, scanLog } from './journal-log-format';
import { JournalCorruptError, JournalRecord, acceptedRecord } from './journal-record';
import { driveNewRecord, newOffer } from '../../test-support/journal-fixtures';
import { WorkerJournal } from './worker-journal';

let dir: string;
beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'ql-journal-log-'))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const at = '2026-01-01T00:00:00.000Z';
const record = (over: Partial<JournalRecord> = {}): JournalRecord => ({
  ...acceptedRecord(newOffer(), at),
  ...over,
});
const next = (r: JournalRecord): JournalRecord => ({ ...r, state: 'starting_acknowledged' });
const logPath = () => join(dir, LOG_FILE);
const NONE = new Map<string, JournalRecord>();

/** Opens the log of `dir`, hands back what it loaded, closes it. */
function loaded(older = NONE): JournalRecord[] {
  const { log, records } = JournalLog.open(dir, older);
  log.close();
  return [...records.values()].sort((a, b) => (a.offerId < b.offerId ? -1 : 1));
}
const sorted = (rs: JournalRecord[]) => [...rs].sort((a, b) => (a.offerId < b.offerId ? -1 : 1));

describe('the journal log (ADR 0041)', () => {
  it('appends one checksummed frame per step and reads back the last version of each record', () => {
    const { log } = JournalLog.open(dir, NONE);
    expect(readFileSync(logPath(), 'utf8')).toBe(LOG_HEADER);
    expect(statSync(logPath()).mode & 0o777).toBe(0o600);
    const a = record();
    const b = record();
    log.append({ put: a });
    log.append({ put: b });
    log.append({ put: next(a) });
    log.append({ del: [b.offerId] });
    const text = readFileSync(logPath(), 'utf8');
    expect(text.split('\n').slice(1, -1)).toEqual([
      expect.stringMatching(/^[0-9a-f]{8} [0-9a-f]{8} \{"put":\{"schema":/),
      expect.stringMatching(/^[0-9a-f]{8} [0-9a-f]{8} \{"put":/),
      expect.stringMatching(/"state":"starting_acknowledged"/),
      // 48 bytes of payload: {"del":["<36 characters>"]}
      expect.stringMatching(new RegExp(`^00000030 [0-9a-f]{8} \\{"del":\\["${b.offerId}"\\]\\}$`)),
    ]);
    expect(log.size).toBe(Buffer.byteLength(text));
    log.close();
    expect(readJournalLog(dir)).toEqual([next(a)]);
    expect(loaded()).toEqual([next(a)]);
  });

  it('keeps a log that holds only live records as it is (no rewrite at open)', () => {
    const { log } = JournalLog.open(dir, NONE);
    const a = record();
    log.append({ put: a });
    log.close();
    const inode = statSync(logPath()).ino;
    expect(loaded()).toEqual([a]);
    expect(statSync(logPath()).ino).toBe(inode);
  });

  it('ignores a torn last append of every length, truncates it away, and appends after it', () => {
    const { log } = JournalLog.open(dir, NONE);
    const a = record();
    const b = record();
    log.append({ put: a });
    log.append({ put: b });
    log.close();
    const good = readFileSync(logPath());
    const frame = encodeFrame({ del: [a.offerId], put: next(b) });
    for (let cut = 1; cut < frame.length; cut++) {
      const torn = Buffer.concat([good, frame.subarray(0, cut)]);
      expect({ cut, scanned: scanLog(torn, LOG_FILE) }).toMatchObject({
        cut,
        scanned: { end: good.length, tornBytes: cut },
      });
      writeFileSync(logPath(), torn);
      expect({ cut, records: loaded() }).toEqual({ cut, records: sorted([a, b]) });
      expect({ cut, size: statSync(logPath()).size }).toEqual({ cut, size: good.length });
    }
    // Whole in length but not in content (a power cut wrote its last block, not its first): torn too.
    const damaged = [Buffer.from(frame), Buffer.from(frame)];
    damaged[0]!.fill(0, 30, 60); // zeros where a block never reached the disk
    damaged[1]![frame.length - 5] ^= 0x01; // one bit
    for (const bad of damaged) {
      writeFileSync(logPath(), Buffer.concat([good, bad]));
      expect(sorted(readJournalLog(dir))).toEqual(sorted([a, b]));
      expect(loaded()).toEqual(sorted([a, b]));
      expect(statSync(logPath()).size).toBe(good.length);
    }
    const again = JournalLog.open(dir, NONE).log;
    again.append({ put: next(b) });
    again.close();
    expect(loaded()).toEqual(sorted([a, next(b)]));
  });

  it('refuses a damaged frame that whole frames follow (it was acknowledged once), and changes nothing', () => {
    const { log } = JournalLog.open(dir, NONE);
    const a = record();
    log.append({ put: a });
    log.append({ put: next(a) });
    log.close();
    const bytes = readFileSync(logPath());
    const firstFrame = LOG_HEADER.length;
    bytes[firstFrame + 40] ^= 0x20; // a flipped bit inside the first frame's payload
    writeFileSync(logPath(), bytes);
    expect(() => JournalLog.open(dir, NONE)).toThrow(JournalCorruptError);
    expect(() => JournalLog.open(dir, NONE)).toThrow(
      `journal log journal.log has a damaged entry at byte ${firstFrame} before whole ones; the worker stops pulling`,
    );
    expect(readFileSync(logPath()).equals(bytes)).toBe(true);
    expect(() => readJournalLog(dir)).toThrow(JournalCorruptError);
  });

  it('a damaged frame that only lazy frames follow is the tail a power cut took (ADR 0043): left out with them', () => {
    const { log } = JournalLog.open(dir, NONE);
    const a = record();
    const b = record();
    log.append({ put: a });
    log.append({ put: b, lazy: true });
    expect(log.synced).toBe(false);
    log.append({ put: next(b), lazy: true });
    log.close();
    const bytes = readFileSync(logPath());
    const lost = bytes.indexOf('\n', LOG_HEADER.length) + 1; // b's frame: the first lazy one
    bytes[lost + 40] ^= 0x20;
    writeFileSync(logPath(), bytes);
    expect(loaded()).toEqual([a]);
    expect(statSync(logPath()).size).toBe(lost); // cut back to the last frame before the damage
  });

  it('a damaged frame before a whole durable frame is corruption even with lazy frames between', () => {
    const { log } = JournalLog.open(dir, NONE);
    const a = record();
    log.append({ put: a, lazy: true });
    log.append({ put: next(a), lazy: true });
    log.append({ put: record() });
    expect(log.synced).toBe(true); // the durable frame's fdatasync covered the lazy ones
    log.close();
    const bytes = readFileSync(logPath());
    bytes[LOG_HEADER.length + 40] ^= 0x20;
    writeFileSync(logPath(), bytes);
    expect(() => JournalLog.open(dir, NONE)).toThrow(JournalCorruptError);
    expect(readFileSync(logPath()).equals(bytes)).toBe(true);
  });

  it('refuses a lazy marker that is not `true`', () => {
    const { log } = JournalLog.open(dir, NONE);
    log.close();
    const payload = JSON.stringify({ put: record(), lazy: 1 });
    const frame = encodeFrame({ put: record() }).toString('utf8');
    expect(frame).toContain('"put":');
    const len = Buffer.byteLength(payload).toString(16).padStart(8, '0');
    const sum = crc32(Buffer.from(payload)).toString(16).padStart(8, '0');
    writeFileSync(logPath(), `${LOG_HEADER}${len} ${sum} ${payload}\n`);
    expect(() => JournalLog.open(dir, NONE)).toThrow('lazy: not true');
  });

  it('refuses a whole frame that is not an entry, a record that breaks an invariant, and another format', () => {
    const frame = (payload: string) => {
      const body = Buffer.from(payload);
      const { crc32 } = jest.requireActual<typeof import('node:zlib')>('node:zlib');
      const hex = (n: number) => n.toString(16).padStart(8, '0');
      return `${hex(body.length)} ${hex(crc32(body))} ${payload}\n`;
    };
    const cases: [string, RegExp][] = [
      [LOG_HEADER + frame('[1,2]'), /unreadable entry at byte 31 \(not an object\)/],
      [LOG_HEADER + frame('{"put":{"offerId":"x"}}'), /\(put: no offer id\)/],
      [LOG_HEADER + frame('{"del":["x"]}'), /\(del: not a list of offer ids\)/],
      [LOG_HEADER + frame('{"up":1}'), /\(unknown shape\)/],
      [LOG_HEADER + frame('{"put":'), /\(not valid JSON\)/],
      [
        LOG_HEADER + frame(JSON.stringify({ put: { ...record(), state: 'finished' } })),
        /the record of offer .* is unreadable \(state: /,
      ],
      [
        LOG_HEADER + frame(JSON.stringify({ put: { ...record(), state: 'start_failed' } })),
        /\(leaseToken: kept_when_finished\)/,
      ],
      ['qinglong/worker-journal-log@v2\n', /does not start with "qinglong\/worker-journal-log@v1"/],
      ['', /does not start with/],
    ];
    for (const [text, message] of cases) {
      writeFileSync(logPath(), text);
      expect(() => JournalLog.open(dir, NONE)).toThrow(message);
      expect(readFileSync(logPath(), 'utf8')).toBe(text);
    }
  });

  it('compaction rewrites exactly the live records and goes on appending to the new file', () => {
    const { log } = JournalLog.open(dir, NONE, { minBytes: 0, ratio: 2 });
    const live: JournalRecord[] = [];
    for (let i = 0; i < 6; i++) {
      const r = record();
      log.append({ put: r });
      log.append({ put: next(r) });
      if (i % 2) log.append({ del: [r.offerId] });
      else live.push(next(r));
    }
    expect(log.wantsCompaction).toBe(true);
    const before = log.size;
    log.compact(live);
    expect(log.wantsCompaction).toBe(false);
    expect(log.size).toBeLessThan(before / 2);
    expect(statSync(logPath()).size).toBe(log.size);
    expect(statSync(logPath()).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual([LOG_FILE]);
    expect(sorted(readJournalLog(dir))).toEqual(sorted(live));
    const text = readFileSync(logPath(), 'utf8');
    expect(text.split('\n').slice(1, -1)).toHaveLength(live.length); // one put frame each, nothing else
    const extra = record();
    log.append({ put: extra });
    log.close();
    expect(loaded()).toEqual(sorted([...live, extra]));
  });

  it('a log with superseded frames is rewritten at open, its torn tail with them', () => {
    const { log } = JournalLog.open(dir, NONE);
    const a = record();
    log.append({ put: a });
    log.append({ put: next(a) });
    log.close();
    writeFileSync(
      logPath(),
      Buffer.concat([readFileSync(logPath()), encodeFrame({ put: a }).subarray(0, 9)]),
    );
    expect(loaded()).toEqual([next(a)]);
    expect(
      readFileSync(logPath()).equals(Buffer.concat([Buffer.from(LOG_HEADER), encodeFrame({ put: next(a) })])),
    ).toBe(true);
  });

  it('the threshold: at least minBytes and ratio times the live records; a failed compaction waits for another minBytes', () => {
    expect(COMPACTION).toEqual({ minBytes: 1 << 20, ratio: 4 });
    const { log } = JournalLog.open(dir, NONE, { minBytes: 4096, ratio: 4 });
    const r = record();
    log.append({ put: r });
    while (log.size < 4096) log.append({ put: r });
    expect(log.wantsCompaction).toBe(true);
    const big = [...Array(12)].map(() => record());
    for (const x of big) log.append({ put: x }); // now 13 live records: far more than a quarter of the log
    expect(log.wantsCompaction).toBe(false);
    for (const x of big) log.append({ del: [x.offerId] });
    expect(log.wantsCompaction).toBe(true);
    rmSync(dir, { recursive: true }); // the temp file cannot be made
    expect(() => log.compact([r])).toThrow(/ENOENT/);
    expect(log.wantsCompaction).toBe(false);
    log.close();
  });
});

describe('migration from per-record files (a worker upgraded in place keeps its runs)', () => {
  const oldFile = (r: JournalRecord) =>
    writeFileSync(join(dir, `${r.offerId}.json`), `${JSON.stringify(r)}\n`, { mode: 0o600 });
  const journal = () => new WorkerJournal({ dir, workerId: 'worker-1', maxRecords: 64 });

  it('loads the files of an older worker once, writes them into the log and removes them', async () => {
    const rs = [
      record(),
      record({ state: 'running_acknowledged', process: { pid: 7, pgid: 7, bootId: null } }),
    ];
    rs.forEach(oldFile);
    const j = journal();
    await j.open();
    expect(sorted((await j.page(null)).records.slice())).toEqual(sorted(rs));
    expect(readdirSync(dir).filter((n) => n.endsWith('.json'))).toEqual([]);
    expect(sorted(readJournalLog(dir))).toEqual(sorted(rs));
    await j.close();
    const again = journal();
    await again.open();
    expect(again.size).toBe(2);
    await again.close();
  });

  it('after a crash half way through (the log written, some files left), the files hold the same records and go', async () => {
    const rs = [record(), record()];
    const { log } = JournalLog.open(dir, NONE);
    for (const r of rs) log.append({ put: r });
    log.close();
    oldFile(rs[1]!);
    const j = journal();
    await j.open();
    expect(sorted((await j.page(null)).records.slice())).toEqual(sorted(rs));
    expect(existsSync(join(dir, `${rs[1]!.offerId}.json`))).toBe(false);
    await j.close();
  });

  it('a file newer than the log (only an older worker writes files) wins over the log', async () => {
    const r = record();
    const { log } = JournalLog.open(dir, NONE);
    log.append({ put: r });
    log.close();
    oldFile(next(r));
    const j = journal();
    await j.open();
    expect(await j.get(r.offerId)).toEqual(next(r));
    await j.close();
    expect(readJournalLog(dir)).toEqual([next(r)]);
  });
});

describe('compaction between steps (WorkerJournal)', () => {
  const turn = () => new Promise((done) => setImmediate(done));
  async function finishRuns(j: WorkerJournal, runs: number): Promise<void> {
    for (let i = 0; i < runs; i++) await driveNewRecord(j, 'completion_acknowledged');
  }

  it('runs in a later turn of the event loop, never inside the step that crossed the threshold', async () => {
    const j = new WorkerJournal({
      dir,
      workerId: 'w',
      maxRecords: 4,
      compaction: { minBytes: 8192, ratio: 2 },
    });
    await j.open();
    const rename = jest.spyOn(fs, 'renameSync');
    try {
      for (let runs = 1; rename.mock.calls.length === 0; runs++) {
        expect(runs).toBeLessThan(30);
        // Seven steps with no turn of the event loop between them: none may have rewritten the log.
        await finishRuns(j, 1);
        expect(rename).not.toHaveBeenCalled();
        await turn(); // the rewrite, once a step asked for it
      }
    } finally {
      rename.mockRestore();
    }
    expect(statSync(logPath()).size).toBeLessThan(8192);
    expect(sorted(readJournalLog(dir))).toEqual(sorted((await j.page(null)).records.slice()));
    await j.close();
  });

  it('a failed compaction is reported, leaves the log as it was, and the steps go on', async () => {
    const failures: unknown[] = [];
    const j = new WorkerJournal({
      dir,
      workerId: 'w',
      maxRecords: 4,
      compaction: { minBytes: 4096, ratio: 2 },
      onCompactionError: (error) => failures.push(error),
    });
    await j.open();
    const rename = jest.spyOn(fs, 'renameSync').mockImplementationOnce(() => {
      throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO' });
    });
    try {
      while (failures.length === 0) {
        await finishRuns(j, 1);
        await turn();
      }
    } finally {
      rename.mockRestore();
    }
    expect(failures).toEqual([expect.objectContaining({ message: 'EIO: i/o error, rename' })]);
    expect(readdirSync(dir).filter((n) => n.startsWith('.tmp-'))).toEqual([]);
    expect(sorted(readJournalLog(dir))).toEqual(sorted((await j.page(null)).records.slice()));
    await finishRuns(j, 1);
    expect(sorted(readJournalLog(dir))).toEqual(sorted((await j.page(null)).records.slice()));
    await j.close();
  });

  it('is refused with a clear error when its settings make no sense', () => {
    const bad = (compaction: { minBytes: number; ratio: number }) => () =>
      new WorkerJournal({ dir, workerId: 'w', maxRecords: 4, compaction });
    expect(bad({ minBytes: -1, ratio: 4 })).toThrow(/minBytes ≥ 0 \(an integer\) and ratio ≥ 1/);
    expect(bad({ minBytes: 1.5, ratio: 4 })).toThrow(/minBytes/);
    expect(bad({ minBytes: 0, ratio: 0.5 })).toThrow(/ratio ≥ 1/);
    expect(bad({ minBytes: 0, ratio: NaN })).toThrow(/ratio ≥ 1/);
  });
});
