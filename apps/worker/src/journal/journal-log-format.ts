import { isUuidV7 } from '@ql/domain';
import { crc32 } from 'node:zlib';
import { JournalCorruptError } from './journal-record';

/**
 * The bytes of the journal's append-only log (ADR 0041). A header line names the format; then one
 * frame per durable step:
 *
 *     <payload length: 8 hex> <CRC-32 of the payload: 8 hex> <payload: one JSON object>\n
 *
 * The payload is `{"del":[offer ids],"put":<record>}`, either part optional: `del` removes records,
 * then `put` stores one whole record (never one that the same frame removes). JSON has no raw line
 * feed, so each frame is one line; the length and the checksum make a frame whole or not at all.
 * A frame written without its own fdatasync ends `,"lazy":true}` (ADR 0043): a power cut may lose it
 * (it is durable only once a later frame's fdatasync returned), so a damaged frame that only lazy
 * frames follow is still the lost tail of the log, not corruption.
 */
export const LOG_HEADER = 'qinglong/worker-journal-log@v1\n';
export const LOG_HEADER_BYTES = Buffer.from(LOG_HEADER, 'latin1');
/** Bytes of a frame beyond its payload: two 8-hex fields, two spaces, the line feed. */
export const FRAME_OVERHEAD = 19;

export interface LogEntry<R> {
  readonly del?: readonly string[];
  readonly put?: R;
  /** Written without an fdatasync of its own: durable once a later frame's is (ADR 0043). */
  readonly lazy?: true;
}

const LAZY = ',"lazy":true';

const LF = 0x0a;
const SPACE = 0x20;
const HEX8 = /^[0-9a-f]{8}$/;

const hex8 = (n: number) => n.toString(16).padStart(8, '0');

/** The frame of one entry: the payload JSON (`del` first), its length and checksum. */
export function encodeFrame(entry: LogEntry<object>): Buffer {
  const del = entry.del?.length ? `"del":${JSON.stringify(entry.del)}` : '';
  const put = entry.put ? `"put":${JSON.stringify(entry.put)}` : '';
  const payload = `{${del}${del && put ? ',' : ''}${put}${entry.lazy ? LAZY : ''}}`;
  const length = Buffer.byteLength(payload, 'utf8');
  const frame = Buffer.allocUnsafe(length + FRAME_OVERHEAD);
  frame.write(payload, 18, 'utf8');
  frame.write(hex8(length), 0, 'latin1');
  frame[8] = SPACE;
  frame.write(hex8(crc32(frame.subarray(18, 18 + length))), 9, 'latin1');
  frame[17] = SPACE;
  frame[frame.length - 1] = LF;
  return frame;
}

/**
 * Bytes the record of `entry` would take as a put-only frame (a compacted log holds one each):
 * the frame less its `"del":[…],` part.
 */
export function putFrameBytes(entry: LogEntry<object>, frame: Buffer): number {
  const lazy = entry.lazy ? LAZY.length : 0;
  const del = entry.del?.length ? 7 + Buffer.byteLength(JSON.stringify(entry.del)) : 0;
  return frame.length - lazy - del;
}

export interface ScannedLog {
  /** Each whole frame's entry, in order; `put` not validated yet (only the surviving ones need be). */
  readonly entries: readonly LogEntry<unknown>[];
  /** Bytes of the header and the whole frames: where the next append goes. */
  readonly end: number;
  /** Bytes after `end` that are no whole frame: an append a crash cut short, never read. */
  readonly tornBytes: number;
}

/**
 * Reads a log's bytes. A damaged frame with no whole durable frame after it is the lost tail of the
 * log — the torn last append, or lazy frames a power cut caught before any later fdatasync (ADR 0043)
 * — and is left out with everything after it. A damaged frame with a whole durable frame after it was
 * on disk once (that frame's fdatasync covered it): the log is corrupt and is refused, as is a whole
 * frame whose payload is not an entry.
 */
export function scanLog(bytes: Buffer, name: string): ScannedLog {
  if (
    bytes.length < LOG_HEADER_BYTES.length ||
    !bytes.subarray(0, LOG_HEADER_BYTES.length).equals(LOG_HEADER_BYTES)
  ) {
    throw new JournalCorruptError(
      `journal log ${name} does not start with ${JSON.stringify(LOG_HEADER.trim())}; the worker stops pulling`,
    );
  }
  const entries: LogEntry<unknown>[] = [];
  let at = LOG_HEADER_BYTES.length;
  while (at < bytes.length) {
    const payload = frameAt(bytes, at);
    if (payload === null) {
      if (wholeDurableFrameAfter(bytes, at, name)) {
        throw new JournalCorruptError(
          `journal log ${name} has a damaged entry at byte ${at} before whole ones; the worker stops pulling`,
        );
      }
      return { entries, end: at, tornBytes: bytes.length - at };
    }
    entries.push(readEntry(payload, name, at));
    at += payload.length + FRAME_OVERHEAD;
  }
  return { entries, end: at, tornBytes: 0 };
}

/** The payload of the whole frame starting at `at`, or null (cut short, or any field wrong). */
function frameAt(bytes: Buffer, at: number): Buffer | null {
  const lf = bytes.indexOf(LF, at);
  if (lf < 0 || lf - at < FRAME_OVERHEAD - 1 || bytes[at + 8] !== SPACE || bytes[at + 17] !== SPACE) {
    return null;
  }
  const length = readHex8(bytes, at);
  const sum = readHex8(bytes, at + 9);
  if (length === null || sum === null || length !== lf - at - (FRAME_OVERHEAD - 1)) return null;
  const payload = bytes.subarray(at + 18, lf);
  return crc32(payload) === sum ? payload : null;
}

function readHex8(bytes: Buffer, at: number): number | null {
  const text = bytes.toString('latin1', at, at + 8);
  return HEX8.test(text) ? parseInt(text, 16) : null;
}

function wholeDurableFrameAfter(bytes: Buffer, at: number, name: string): boolean {
  for (let lf = bytes.indexOf(LF, at); lf >= 0 && lf + 1 < bytes.length; lf = bytes.indexOf(LF, lf + 1)) {
    const payload = frameAt(bytes, lf + 1);
    if (payload !== null && !readEntry(payload, name, lf + 1).lazy) return true;
  }
  return false;
}

/** A whole frame's payload as an entry; anything else in a checksummed frame is corruption. */
function readEntry(payload: Buffer, name: string, at: number): LogEntry<unknown> {
  const corrupt = (why: string) =>
    new JournalCorruptError(
      `journal log ${name} has an unreadable entry at byte ${at} (${why}); the worker stops pulling`,
    );
  let value: unknown;
  try {
    value = JSON.parse(payload.toString('utf8'));
  } catch {
    throw corrupt('not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw corrupt('not an object');
  const { del, put, lazy, ...rest } = value as { del?: unknown; put?: unknown; lazy?: unknown };
  if (Object.keys(rest).length || (del === undefined && put === undefined)) throw corrupt('unknown shape');
  if (lazy !== undefined && lazy !== true) throw corrupt('lazy: not true');
  if (
    del !== undefined &&
    (!Array.isArray(del) || !del.every((id) => typeof id === 'string' && isUuidV7(id)))
  ) {
    throw corrupt('del: not a list of offer ids');
  }
  if (put !== undefined) {
    const offerId = (put as { offerId?: unknown } | null)?.offerId;
    if (typeof offerId !== 'string' || !isUuidV7(offerId)) throw corrupt('put: no offer id');
  }
  return value as LogEntry<unknown>;
}

/** The offer id of an entry's record (checked by `scanLog`). */
export const putId = (entry: LogEntry<unknown>): string | undefined =>
  (entry.put as { offerId: string } | undefined)?.offerId;
