import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { TarInput, padBlock, tarHeader, writeTar } from '@ql/contracts';

/** A `.tar.gz` of these files (path → content) and its digest. */
export function bundleOf(files: Record<string, string | Buffer>) {
  const entries: TarInput[] = Object.entries(files).map(([path, data]) => ({
    path,
    type: 'file',
    mode: 0o644,
    data: Buffer.isBuffer(data) ? data : Buffer.from(data, 'utf8'),
  }));
  const content = gzipSync(writeTar(entries));
  return { content, digest: createHash('sha256').update(content).digest('hex') };
}

/** A hostile `.tar.gz` from raw entries: [name, typeflag, content or link target]. */
export function craftedBundle(entries: readonly (readonly [string, string, string?])[]): Buffer {
  const blocks: Buffer[] = [];
  for (const [name, type, extra = ''] of entries) {
    const isFile = type === '0';
    const data = Buffer.from(isFile ? extra : '', 'utf8');
    blocks.push(tarHeader(name, type, 0o644, data.length, isFile ? '' : extra));
    if (data.length) blocks.push(padBlock(data));
  }
  blocks.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(blocks));
}
