// Size: the one tar reader of script bundles (ADR 0051): ustar + pax headers, and every safety rule
// both the control plane (upload) and the worker (unpack) apply, kept together on purpose.
import { posix } from 'node:path';
import { BundleTree, MAX_LINK_HOPS } from './bundle-tree';

/**
 * Script bundles (issue 19, ADR 0051) are gzip-compressed tar archives. The control plane validates
 * one at upload and the worker again while it unpacks, with the same reader and the same rules: no
 * absolute path, no `..`, no link leading out of the bundle and no entry written through a link, no
 * device or FIFO, no duplicate path, at most `maxFiles` entries and `maxUnpackedBytes` of content.
 */
export const BUNDLE_LIMITS = {
  maxFiles: 10_000,
  maxUnpackedBytes: 256 * 1024 * 1024,
  maxPathBytes: 1024,
  maxDepth: 32,
  /** A pax extended header larger than this is refused (they carry a path or two). */
  maxPaxBytes: 64 * 1024,
} as const;

export type BundleLimits = { readonly [K in keyof typeof BUNDLE_LIMITS]: number };

export const BUNDLE_ARCHIVE_RULES = [
  'not_gzip',
  'bad_header',
  'truncated',
  'absolute_path',
  'parent_segment',
  'bad_path',
  'link_out',
  'through_link',
  'unsupported_entry',
  'duplicate_path',
  'too_many_files',
  'too_big',
] as const;
export type BundleArchiveRule = (typeof BUNDLE_ARCHIVE_RULES)[number];

/** A bundle broke a rule: `rule` is a stable code, the message names the entry. */
export class BundleArchiveError extends Error {
  override readonly name = 'BundleArchiveError';
  constructor(
    readonly rule: BundleArchiveRule,
    message: string,
  ) {
    super(`${rule}: ${message}`);
  }
}

export type TarEntryType = 'file' | 'directory' | 'symlink' | 'hardlink';

/** One entry as the reader hands it out: a normalized relative path, never `.` or empty. */
export interface TarEntry {
  readonly path: string;
  readonly type: TarEntryType;
  /** 0o755 for folders and executable files, 0o644 otherwise: no setuid, sticky or group-write bits. */
  readonly mode: number;
  readonly size: number;
  /** symlink: the target as written (relative); hardlink: the normalized path of an earlier file. */
  readonly linkTarget?: string;
}

export type TarEvent =
  | { readonly kind: 'entry'; readonly entry: TarEntry }
  | { readonly kind: 'data'; readonly chunk: Buffer }
  | { readonly kind: 'end' };

export const BLOCK = 512;

/**
 * A streaming tar reader: `push` decompressed bytes, get the events they complete; `finish` at the end
 * of input. Every rule is checked on the headers as they come, so a bad bundle stops at its first bad
 * entry, and the content bytes are counted, so a gzip bomb stops at the limit.
 */
export class TarReader {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Content bytes still to come of the current entry, then its padding. */
  private dataLeft = 0;
  private padLeft = 0;
  private pax: Record<string, string> = {};
  private longName: string | null = null;
  private longLink: string | null = null;
  private zeroBlocks = 0;
  private done = false;
  private entries = 0;
  private contentBytes = 0;
  private readonly seen = new Map<string, TarEntryType>();
  private readonly links = new Set<string>();
  /** Folders and links as they will stand on the disk: each link is resolved through the others. */
  readonly tree = new BundleTree();
  /** Extended headers being collected (pax `x`, GNU `L`/`K`). */
  private meta: { type: string; left: number; parts: Buffer[] } | null = null;

  constructor(private readonly limits: BundleLimits = BUNDLE_LIMITS) {}

  get files(): number {
    return this.entries;
  }

  get bytes(): number {
    return this.contentBytes;
  }

  push(chunk: Buffer): TarEvent[] {
    const events: TarEvent[] = [];
    let offset = 0;
    while (offset < chunk.length) {
      if (this.done) {
        // Past the end marker only zero padding may follow (tar pads to a record size).
        if (chunk.subarray(offset).some((b) => b !== 0))
          throw new BundleArchiveError('bad_header', 'data after the end of the archive');
        return events;
      }
      if (this.dataLeft > 0) {
        const take = Math.min(this.dataLeft, chunk.length - offset);
        const part = chunk.subarray(offset, offset + take);
        if (this.meta) this.meta.parts.push(part);
        else events.push({ kind: 'data', chunk: part });
        this.dataLeft -= take;
        offset += take;
        if (this.dataLeft === 0 && !this.meta) events.push({ kind: 'end' });
        if (this.dataLeft === 0 && this.meta) this.finishMeta();
        continue;
      }
      if (this.padLeft > 0) {
        const take = Math.min(this.padLeft, chunk.length - offset);
        this.padLeft -= take;
        offset += take;
        continue;
      }
      const need = BLOCK - this.pendingBytes;
      const take = Math.min(need, chunk.length - offset);
      this.pending.push(chunk.subarray(offset, offset + take));
      this.pendingBytes += take;
      offset += take;
      if (this.pendingBytes < BLOCK) continue;
      const header = Buffer.concat(this.pending, BLOCK);
      this.pending = [];
      this.pendingBytes = 0;
      const event = this.header(header);
      if (event) {
        events.push(event);
        if (event.kind === 'entry' && event.entry.type !== 'file') events.push({ kind: 'end' });
        else if (event.kind === 'entry' && event.entry.size === 0) events.push({ kind: 'end' });
      }
    }
    return events;
  }

  /** The input ended: it must have ended on an entry boundary (the end marker is optional). */
  finish(): void {
    if (this.dataLeft > 0 || this.padLeft > 0 || this.pendingBytes > 0 || this.meta)
      throw new BundleArchiveError('truncated', 'the archive ends inside an entry');
    if (this.zeroBlocks === 1) this.done = true;
    // A link may lead through a link that came after it: each is walked again with all of them known.
    for (const path of this.tree.linkPaths()) this.checkLink(path);
  }

  /** Issue 27 item 5: a link is followed through the bundle's other links, not read lexically alone. */
  private checkLink(path: string): void {
    const resolved = this.tree.resolveLink(path);
    if (resolved.kind === 'outside')
      throw new BundleArchiveError(
        'link_out',
        `the link "${path}" leads out of the bundle through other links`,
      );
    if (resolved.kind === 'too_many_links')
      throw new BundleArchiveError(
        'link_out',
        `the link "${path}" goes through more than ${MAX_LINK_HOPS} links`,
      );
  }

  private header(block: Buffer): TarEvent | null {
    if (block.every((b) => b === 0)) {
      if (++this.zeroBlocks === 2) this.done = true;
      return null;
    }
    if (this.zeroBlocks > 0) throw new BundleArchiveError('bad_header', 'an entry after an empty block');
    if (!checksumOk(block)) throw new BundleArchiveError('bad_header', 'header checksum mismatch');
    const type = String.fromCharCode(block[156]!);
    const size = readSize(block);
    if (type === 'x' || type === 'g' || type === 'L' || type === 'K') {
      if (size > this.limits.maxPaxBytes)
        throw new BundleArchiveError('bad_header', 'an extended header is too large');
      this.meta = { type, left: size, parts: [] };
      this.dataLeft = size;
      this.padLeft = padding(size);
      if (size === 0) this.finishMeta();
      return null;
    }
    const rawPath = this.longName ?? this.pax.path ?? headerPath(block);
    const rawLink = this.longLink ?? this.pax.linkpath ?? cString(block, 157, 100);
    const paxSize = this.pax.size;
    this.longName = null;
    this.longLink = null;
    this.pax = {};
    const entrySize = paxSize !== undefined ? Number(paxSize) : size;
    if (!Number.isSafeInteger(entrySize) || entrySize < 0)
      throw new BundleArchiveError('bad_header', 'an entry size is not a number');
    const kind = entryType(type, rawPath);
    const path = normalizeEntryPath(rawPath, this.limits);
    if (path === null) {
      // `./` itself: a folder entry for the root is allowed and means nothing.
      if (kind !== 'directory') throw new BundleArchiveError('bad_path', `"${rawPath}" names the root`);
      this.skipContent(entrySize);
      return null;
    }
    if (++this.entries > this.limits.maxFiles)
      throw new BundleArchiveError('too_many_files', `more than ${this.limits.maxFiles} entries`);
    for (let at = path.indexOf('/'); at >= 0; at = path.indexOf('/', at + 1)) {
      const parent = path.slice(0, at);
      if (this.links.has(parent))
        throw new BundleArchiveError('through_link', `"${path}" lies under the link "${parent}"`);
      const known = this.seen.get(parent);
      if (known !== undefined && known !== 'directory')
        throw new BundleArchiveError('bad_path', `"${path}" lies under the file "${parent}"`);
    }
    const before = this.seen.get(path);
    if (before !== undefined && !(before === 'directory' && kind === 'directory'))
      throw new BundleArchiveError('duplicate_path', `"${path}" appears twice`);
    let linkTarget: string | undefined;
    if (kind === 'symlink') {
      linkTarget = rawLink;
      if (rawLink === '' || rawLink.includes('\0'))
        throw new BundleArchiveError('link_out', `the link "${path}" has no target`);
      if (rawLink.startsWith('/'))
        throw new BundleArchiveError('link_out', `the link "${path}" points to an absolute path`);
      const resolved = posix.normalize(posix.join(posix.dirname(path), rawLink));
      if (resolved === '..' || resolved.startsWith('../'))
        throw new BundleArchiveError('link_out', `the link "${path}" points out of the bundle`);
      this.links.add(path);
      this.tree.add(path, kind, rawLink);
      this.checkLink(path);
    } else if (kind === 'hardlink') {
      const target = normalizeEntryPath(rawLink, this.limits);
      if (target === null || this.seen.get(target) !== 'file')
        throw new BundleArchiveError(
          'link_out',
          `the hard link "${path}" names no earlier file of the bundle`,
        );
      linkTarget = target;
    }
    this.seen.set(path, kind);
    if (kind !== 'symlink') this.tree.add(path, kind);
    const contentSize = kind === 'file' ? entrySize : 0;
    if (kind === 'file' || kind === 'hardlink') {
      const counted = kind === 'file' ? entrySize : 0;
      this.contentBytes += counted;
      if (this.contentBytes > this.limits.maxUnpackedBytes)
        throw new BundleArchiveError('too_big', `more than ${this.limits.maxUnpackedBytes} bytes unpacked`);
    }
    if (kind !== 'file') this.skipContent(entrySize);
    else {
      this.dataLeft = contentSize;
      this.padLeft = padding(contentSize);
    }
    const mode = kind === 'directory' || (readOctal(block, 100, 8) & 0o100) !== 0 ? 0o755 : 0o644;
    return {
      kind: 'entry',
      entry: { path, type: kind, mode, size: contentSize, ...(linkTarget ? { linkTarget } : {}) },
    };
  }

  /** Content of an entry that has none to hand out (a folder or link with a size): refused. */
  private skipContent(size: number): void {
    if (size !== 0) throw new BundleArchiveError('bad_header', 'a folder or link entry carries content');
  }

  private finishMeta(): void {
    const meta = this.meta!;
    this.meta = null;
    const bytes = Buffer.concat(meta.parts);
    if (meta.type === 'L') this.longName = cString(bytes, 0, bytes.length);
    else if (meta.type === 'K') this.longLink = cString(bytes, 0, bytes.length);
    else if (meta.type === 'x') this.pax = { ...this.pax, ...parsePax(bytes) };
    // 'g' (global): nothing in it matters to a bundle.
  }
}

function entryType(flag: string, path: string): TarEntryType {
  switch (flag) {
    case '0':
    case '\0':
    case '7':
      return path.endsWith('/') ? 'directory' : 'file';
    case '5':
      return 'directory';
    case '2':
      return 'symlink';
    case '1':
      return 'hardlink';
    default:
      throw new BundleArchiveError(
        'unsupported_entry',
        `"${path}" is a ${flag === '3' || flag === '4' ? 'device' : flag === '6' ? 'FIFO' : `type ${JSON.stringify(flag)}`} entry`,
      );
  }
}

/**
 * The relative path an entry names, `./` and trailing slashes dropped, or null for the root itself.
 * Refused: absolute, a `..` segment, NUL, backslash, control characters, over-long or too deep.
 */
export function normalizeEntryPath(raw: string, limits: BundleLimits = BUNDLE_LIMITS): string | null {
  if (raw.startsWith('/')) throw new BundleArchiveError('absolute_path', `"${raw}" is absolute`);
  if (Buffer.byteLength(raw, 'utf8') > limits.maxPathBytes)
    throw new BundleArchiveError('bad_path', 'a path is too long');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(raw))
    throw new BundleArchiveError('bad_path', `${JSON.stringify(raw)} has a control character or backslash`);
  const segments = raw.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) throw new BundleArchiveError('parent_segment', `"${raw}" has a .. segment`);
  if (segments.length > limits.maxDepth) throw new BundleArchiveError('bad_path', `"${raw}" is too deep`);
  return segments.length === 0 ? null : segments.join('/');
}

function checksumOk(block: Buffer): boolean {
  const stored = readOctal(block, 148, 8);
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : block[i]!;
  return stored === sum;
}

function readSize(block: Buffer): number {
  if ((block[124]! & 0x80) !== 0) throw new BundleArchiveError('too_big', 'a base-256 entry size');
  return readOctal(block, 124, 12);
}

function readOctal(block: Buffer, offset: number, length: number): number {
  const text = cString(block, offset, length).trim();
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) throw new BundleArchiveError('bad_header', 'a header number is not octal');
  return parseInt(text, 8);
}

function cString(block: Buffer, offset: number, length: number): string {
  const slice = block.subarray(offset, offset + length);
  const end = slice.indexOf(0);
  return slice.subarray(0, end < 0 ? slice.length : end).toString('utf8');
}

function headerPath(block: Buffer): string {
  const name = cString(block, 0, 100);
  const ustar = block.subarray(257, 262).toString('latin1') === 'ustar';
  const prefix = ustar ? cString(block, 345, 155) : '';
  return prefix ? `${prefix}/${name}` : name;
}

function parsePax(bytes: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let offset = 0;
  while (offset < bytes.length) {
    const space = bytes.indexOf(0x20, offset);
    if (space < 0) throw new BundleArchiveError('bad_header', 'a pax record has no length');
    const length = Number(bytes.subarray(offset, space).toString('latin1'));
    if (!Number.isSafeInteger(length) || length <= space - offset || offset + length > bytes.length)
      throw new BundleArchiveError('bad_header', 'a pax record length is wrong');
    const record = bytes.subarray(space + 1, offset + length - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq > 0) out[record.slice(0, eq)] = record.slice(eq + 1);
    offset += length;
  }
  return out;
}

export function padding(size: number): number {
  return (BLOCK - (size % BLOCK)) % BLOCK;
}

/** What a bundle holds, once read through. */
export interface BundleSummary {
  readonly files: number;
  readonly unpackedBytes: number;
}

/**
 * Reads a `.tar.gz` through, handing each event to `handle` (awaited, so a writer keeps pace): the
 * gzip stream is bounded too, so a bomb stops once its output passes what the limits allow.
 */
export async function readBundle(
  source: AsyncIterable<Buffer> | Buffer,
  handle: (event: TarEvent) => void | Promise<void> = () => undefined,
  limits: BundleLimits = BUNDLE_LIMITS,
): Promise<BundleSummary> {
  const reader = new TarReader(limits);
  await readThrough(reader, source, handle, limits);
  return { files: reader.files, unpackedBytes: reader.bytes };
}

/** The folders and links a bundle makes once unpacked (read through under every rule). */
export async function readBundleTree(
  source: AsyncIterable<Buffer> | Buffer,
  limits: BundleLimits = BUNDLE_LIMITS,
): Promise<BundleTree> {
  const reader = new TarReader(limits);
  await readThrough(reader, source, () => undefined, limits);
  return reader.tree;
}

async function readThrough(
  reader: TarReader,
  source: AsyncIterable<Buffer> | Buffer,
  handle: (event: TarEvent) => void | Promise<void>,
  limits: BundleLimits,
): Promise<void> {
  const { createGunzip } = await import('node:zlib');
  const { Readable } = await import('node:stream');
  const gunzip = createGunzip();
  const input = Buffer.isBuffer(source) ? Readable.from([source]) : Readable.from(source);
  input.on('error', (error) => gunzip.destroy(error));
  input.pipe(gunzip);
  // Headers and padding: at most three blocks per entry beside its content, and the end marker.
  const maxOutput = limits.maxUnpackedBytes + (limits.maxFiles + 2) * 3 * BLOCK + limits.maxPaxBytes;
  let output = 0;
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) {
      output += chunk.length;
      if (output > maxOutput)
        throw new BundleArchiveError('too_big', `more than ${limits.maxUnpackedBytes} bytes unpacked`);
      for (const event of reader.push(chunk)) await handle(event);
    }
  } catch (error) {
    input.unpipe(gunzip);
    input.destroy();
    gunzip.destroy();
    if (error instanceof BundleArchiveError) throw error;
    const code = (error as NodeJS.ErrnoException).code ?? '';
    if (code.startsWith('Z_') || code === 'ERR_ZLIB_INPUT_CLOSED')
      throw new BundleArchiveError('not_gzip', 'the bundle is not a valid gzip stream');
    throw error;
  }
  reader.finish();
  if (reader.files === 0) throw new BundleArchiveError('bad_path', 'the bundle holds no entry');
}
