import { ValidationError } from '@ql/domain';
import {
  closeSync,
  fchmodSync,
  fdatasyncSync,
  ftruncateSync,
  openSync,
  readFileSync,
  renameSync,
} from 'node:fs';
import { join } from 'node:path';
import { createTempFile, syncFolder, unlinkQuietly, writeFully } from './durable-files';
import { LOG_HEADER_BYTES, LogEntry, encodeFrame, putFrameBytes, putId, scanLog } from './journal-log-format';
import { JournalCorruptError, JournalRecord, validateJournalRecord } from './journal-record';

/** The journal's records, as one append-only log in its folder (ADR 0041). */
export const LOG_FILE = 'journal.log';

/**
 * A compaction is due once the log holds at least `minBytes` and `ratio` times what its live records
 * take (one frame each). A run appends about 4.5 KiB (seven frames of a ~0.6 KiB record): with the
 * default 64 records (~40 KiB live) that is one compaction per ~230 runs.
 */
export const COMPACTION: CompactionPolicy = { minBytes: 1 << 20, ratio: 4 };

export interface CompactionPolicy {
  readonly minBytes: number;
  readonly ratio: number;
}

/** A write failed and could not be undone: the file's tail is unknown, so nothing more is appended. */
export class JournalBrokenError extends Error {
  override readonly name = 'JournalBrokenError';
}

export interface OpenedLog {
  readonly log: JournalLog;
  readonly records: ReadonlyMap<string, JournalRecord>;
}

/**
 * The open log: one descriptor, written at `end` with positional writes. `append` is the one write
 * of a journal step (one write, then one fdatasync unless the entry is lazy: ADR 0043); `compact`
 * rewrites the live records to a fresh file (temp file, fsync, rename, folder fsync) and goes on
 * appending there. All calls are synchronous: a step is written (and, unless lazy, durable, with
 * every lazy frame before it) when the call returns.
 */
export class JournalLog {
  /** Bytes each live record's frame takes in a compacted log, by offer id. */
  private readonly sizes = new Map<string, number>();
  private liveBytes = LOG_HEADER_BYTES.length;
  private nextCompactionAt: number;
  private broken: JournalBrokenError | null = null;
  /** Lazy frames were written since the last fdatasync. */
  private unsynced = false;

  private constructor(
    private readonly dir: string,
    private fd: number,
    private end: number,
    live: Iterable<JournalRecord>,
    private readonly policy: CompactionPolicy,
  ) {
    this.nextCompactionAt = policy.minBytes;
    for (const record of live) this.track({ put: record }, encodeFrame({ put: record }));
  }

  /**
   * Reads the log (a torn tail left out), lays `older` over it — records of per-record files
   * (`<offer id>.json`, from a worker before ADR 0041), which only such a worker can have written
   * after the log — and makes the file hold exactly that: as it is when it already does (a torn tail
   * truncated), else rewritten. Only then may the caller remove the per-record files.
   */
  static open(
    dir: string,
    older: ReadonlyMap<string, JournalRecord>,
    policy: CompactionPolicy = COMPACTION,
  ): OpenedLog {
    const path = join(dir, LOG_FILE);
    const bytes = readIfThere(path);
    const scanned = bytes === null ? null : scanLog(bytes, LOG_FILE);
    const records = new Map(scanned ? replay(scanned.entries) : []);
    for (const [offerId, record] of older) records.set(offerId, record);
    if (scanned && older.size === 0 && scanned.entries.length === records.size) {
      // Every frame is a live record's only one: keep the file, minus a torn tail.
      const fd = openSync(path, 'r+');
      try {
        fchmodSync(fd, 0o600);
        if (scanned.tornBytes > 0) {
          ftruncateSync(fd, scanned.end);
          fdatasyncSync(fd);
        }
      } catch (error) {
        closeSync(fd);
        throw error;
      }
      return { log: new JournalLog(dir, fd, scanned.end, records.values(), policy), records };
    }
    const { fd, end } = writeLog(dir, records.values());
    try {
      syncFolder(dir);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    return { log: new JournalLog(dir, fd, end, records.values(), policy), records };
  }

  /** Bytes of the file that hold whole frames. */
  get size(): number {
    return this.end;
  }

  get wantsCompaction(): boolean {
    return this.end >= this.nextCompactionAt && this.end >= this.policy.ratio * this.liveBytes;
  }

  /**
   * One frame, written and (unless lazy) fdatasynced — which makes every lazy frame before it durable
   * too. On failure the tail is cut back to where it was (so no half frame sits before a later whole
   * one) and the error is thrown; if even that fails, the log is broken and refuses every later write.
   */
  append(entry: LogEntry<JournalRecord>): void {
    this.assertUsable();
    const frame = encodeFrame(entry);
    try {
      writeFully(this.fd, frame, this.end);
      if (!entry.lazy) fdatasyncSync(this.fd);
    } catch (error) {
      this.undoTail(error);
      throw error;
    }
    this.end += frame.length;
    this.unsynced = entry.lazy === true;
    this.track(entry, frame);
  }

  /** Whether every frame written so far is durable (no lazy frame since the last fdatasync). */
  get synced(): boolean {
    return !this.unsynced;
  }

  /**
   * Rewrites `live` — exactly the records the frames so far leave — to a fresh file that replaces
   * the log. A failure before the rename changes nothing (the next try waits for another `minBytes`);
   * after it, appends go to the new file, and a failed folder fsync breaks the log: its name might
   * still point at the old file after a power cut, which would lose every later append.
   */
  compact(live: Iterable<JournalRecord>): void {
    this.assertUsable();
    let written: { fd: number; end: number };
    try {
      written = writeLog(this.dir, live);
    } catch (error) {
      this.nextCompactionAt = this.end + this.policy.minBytes;
      throw error;
    }
    closeSync(this.fd);
    this.fd = written.fd;
    this.end = written.end;
    this.unsynced = false; // the new file was fsynced whole
    this.nextCompactionAt = this.policy.minBytes;
    try {
      syncFolder(this.dir);
    } catch (error) {
      this.broken = new JournalBrokenError(
        `journal ${this.dir}: the folder fsync after a compaction failed (${String(error)}); reopen the journal`,
      );
      throw error;
    }
  }

  /** A clean stop leaves nothing for a power cut to take: lazy frames are synced first. */
  close(): void {
    try {
      if (this.unsynced && !this.broken) fdatasyncSync(this.fd);
    } finally {
      closeSync(this.fd);
    }
  }

  /** Keeps `liveBytes` equal to what a compacted log of the live records would hold. */
  private track(entry: LogEntry<JournalRecord>, frame: Buffer): void {
    for (const offerId of entry.del ?? []) {
      this.liveBytes -= this.sizes.get(offerId) ?? 0;
      this.sizes.delete(offerId);
    }
    if (entry.put) {
      const bytes = putFrameBytes(entry, frame);
      this.liveBytes += bytes - (this.sizes.get(entry.put.offerId) ?? 0);
      this.sizes.set(entry.put.offerId, bytes);
    }
  }

  private undoTail(cause: unknown): void {
    try {
      ftruncateSync(this.fd, this.end);
      fdatasyncSync(this.fd);
    } catch (error) {
      this.broken = new JournalBrokenError(
        `journal ${this.dir}: a failed write (${String(cause)}) could not be undone (${String(error)}); reopen the journal`,
      );
    }
  }

  private assertUsable(): void {
    if (this.broken) throw this.broken;
  }
}

/**
 * The records a log's bytes leave, checked: every surviving record must be valid (superseded ones
 * were checked when they were written, and their checksum says they are what was written).
 */
function replay(entries: readonly LogEntry<unknown>[]): Map<string, JournalRecord> {
  const raw = new Map<string, unknown>();
  for (const entry of entries) {
    for (const offerId of entry.del ?? []) raw.delete(offerId);
    const offerId = putId(entry);
    if (offerId !== undefined) raw.set(offerId, entry.put);
  }
  const records = new Map<string, JournalRecord>();
  for (const [offerId, value] of raw) {
    try {
      records.set(offerId, validateJournalRecord(value));
    } catch (error) {
      const why = error instanceof ValidationError ? `${error.field}: ${error.rule}` : String(error);
      throw new JournalCorruptError(
        `journal log ${LOG_FILE}: the record of offer ${offerId} is unreadable (${why}); the worker stops pulling`,
      );
    }
  }
  return records;
}

/**
 * A fresh log of `live` (one put frame each, in offer order): a temp file, fsynced, renamed over the
 * log and still open for appends. The caller fsyncs the folder; a failure leaves the old log.
 */
function writeLog(dir: string, live: Iterable<JournalRecord>): { fd: number; end: number } {
  const sorted = [...live].sort((a, b) => (a.offerId < b.offerId ? -1 : 1));
  const bytes = Buffer.concat([LOG_HEADER_BYTES, ...sorted.map((put) => encodeFrame({ put }))]);
  const { fd, path } = createTempFile(dir, bytes);
  try {
    renameSync(path, join(dir, LOG_FILE));
  } catch (error) {
    closeSync(fd);
    unlinkQuietly(path);
    throw error;
  }
  return { fd, end: bytes.length };
}

function readIfThere(path: string): Buffer | null {
  try {
    return readFileSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

/**
 * The records a journal folder's log holds now, read without the lock and changing nothing (a torn
 * or half-written tail is left out): for tests and diagnostics that watch a live worker's journal.
 */
export function readJournalLog(dir: string): JournalRecord[] {
  const bytes = readIfThere(join(dir, LOG_FILE));
  return bytes === null ? [] : [...replay(scanLog(bytes, LOG_FILE).entries).values()];
}
