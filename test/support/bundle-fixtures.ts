import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { TarInput, padBlock, tarHeader, writeTar } from '@ql/contracts';
import type { TestPlane } from './test-plane';

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

/**
 * Issue 27 item 5: relative links each lexically inside the bundle that, followed through one another,
 * lead to `/`: `a/up -> ..`, `a/x0 -> up/..`, `a/xN -> x(N-1)/..`, `root -> a/x15`. `reversed` lists
 * them the other way round, so each link names one that comes after it.
 */
export function linkChainEntries(reversed = false): [string, string, string?][] {
  const entries: [string, string, string?][] = [
    ['a', '5'],
    ['a/up', '2', '..'],
    ['a/x0', '2', 'up/..'],
    ...Array.from({ length: 15 }, (_, i) => [`a/x${i + 1}`, '2', `x${i}/..`] as [string, string, string]),
    ['root', '2', 'a/x15'],
    ['run.sh', '0', 'echo 逃出\n'],
  ];
  return reversed ? [entries[0]!, ...entries.slice(1).reverse()] : entries;
}

/** Pushes a bundle of these files (path → content) over the admin API; returns its digest. */
export async function pushBundle(t: TestPlane, files: Record<string, string | Buffer>): Promise<string> {
  const b = bundleOf(files);
  const res = await t.admin('POST', '/api/v1/bundles', undefined, undefined, {
    rawBody: b.content,
    headers: { 'content-type': 'application/gzip' },
  });
  if (res.status !== 200) throw new Error(`bundle not pushed: ${res.status} ${res.raw}`);
  return b.digest;
}
