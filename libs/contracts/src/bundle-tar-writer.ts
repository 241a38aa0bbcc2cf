// The deterministic tar writer of script bundles (ADR 0051): what `bundle push` packs and tests craft.
import { BLOCK, padding } from './bundle-archive';

/** One entry to write: a folder, or a file and its bytes. */
export interface TarInput {
  readonly path: string;
  readonly type: 'file' | 'directory';
  readonly mode: number;
  readonly data?: Buffer;
}

/**
 * Writes a deterministic tar (ustar, a pax header for paths over 100 bytes; mtime 0, uid/gid 0, no
 * user names): the same folder packs to the same bytes, hence the same digest.
 */
export function writeTar(entries: readonly TarInput[]): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    const name = entry.type === 'directory' ? `${entry.path}/` : entry.path;
    const data = entry.type === 'file' ? (entry.data ?? Buffer.alloc(0)) : Buffer.alloc(0);
    if (Buffer.byteLength(name, 'utf8') > 100) {
      const record = paxRecord('path', name);
      blocks.push(tarHeader('PaxHeader', 'x', 0o644, record.length), padBlock(record));
    }
    blocks.push(tarHeader(name, entry.type === 'directory' ? '5' : '0', entry.mode, data.length));
    if (data.length) blocks.push(padBlock(data));
  }
  blocks.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(blocks);
}

function paxRecord(key: string, value: string): Buffer {
  const body = ` ${key}=${value}\n`;
  const bodyBytes = Buffer.byteLength(body, 'utf8');
  // The length counts its own digits: grow it until it is a fixed point.
  let length = bodyBytes + 1;
  while (bodyBytes + String(length).length !== length) length = bodyBytes + String(length).length;
  return Buffer.from(`${length}${body}`, 'utf8');
}

export function padBlock(data: Buffer): Buffer {
  const extra = padding(data.length);
  return extra ? Buffer.concat([data, Buffer.alloc(extra)]) : data;
}

/** One raw ustar header block (the writer's; tests craft hostile archives with it). */
export function tarHeader(name: string, type: string, mode: number, size: number, linkName = ''): Buffer {
  const block = Buffer.alloc(BLOCK);
  const nameBytes = Buffer.from(name, 'utf8');
  nameBytes.copy(block, 0, 0, Math.min(100, nameBytes.length));
  Buffer.from(linkName, 'utf8').copy(block, 157, 0, 100);
  octal(block, 100, 8, mode);
  octal(block, 108, 8, 0);
  octal(block, 116, 8, 0);
  octal(block, 124, 12, size);
  octal(block, 136, 12, 0);
  block.write(type, 156, 'latin1');
  block.write('ustar\u000000', 257, 'latin1');
  block.fill(32, 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  octal(block, 148, 8, sum);
  return block;
}

function octal(block: Buffer, offset: number, length: number, value: number): void {
  block.write(`${value.toString(8).padStart(length - 1, '0')}\0`, offset, length, 'latin1');
}

