// ADR 0051: the worker's side of bundles on a real disk — crafted archives refused again while
// unpacking (nothing left behind), the digest checked, the cache's LRU cap that never evicts a bundle
// an attempt holds, and concurrent misses sharing one download.
import { createHash, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  lstatSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { BUNDLE_LIMITS, BundleArchiveError, BundleLimits } from '@ql/contracts';
import type { WorkerLog } from '../logging/worker-log';
import { BundleCache, BundleUnavailableError } from './bundle-cache';
import { unpackBundle } from './unpack-bundle';
import { bundleOf, craftedBundle } from '../../../../test/support/bundle-fixtures';

const log: WorkerLog = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

describe('bundles on the worker (ADR 0051)', () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'ql-bundles-'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  describe('unpackBundle', () => {
    const unpack = async (bytes: Buffer, limits: BundleLimits = BUNDLE_LIMITS) => {
      const archive = join(root, 'b.tar.gz');
      writeFileSync(archive, bytes);
      return unpackBundle(archive, join(root, 'out'), limits);
    };
    const rule = (bytes: Buffer, limits: BundleLimits = BUNDLE_LIMITS) =>
      unpack(bytes, limits).then(
        () => 'accepted',
        (e: unknown) => (e instanceof BundleArchiveError ? e.rule : String(e)),
      );

    it('writes files, folders and inside links; a hard link becomes a copy, not a second name', async () => {
      await unpack(
        craftedBundle([
          ['lib/', '5'],
          ['lib/a.js', '0', 'A'],
          ['b.js', '2', 'lib/a.js'],
          ['c.js', '1', 'lib/a.js'],
        ]),
      );
      const out = join(root, 'out');
      expect(readFileSync(join(out, 'lib/a.js'), 'utf8')).toBe('A');
      expect(lstatSync(join(out, 'b.js')).isSymbolicLink()).toBe(true);
      expect(readFileSync(join(out, 'c.js'), 'utf8')).toBe('A');
      expect(lstatSync(join(out, 'c.js')).ino).not.toBe(lstatSync(join(out, 'lib/a.js')).ino);
    });

    it.each([
      ['an absolute path', [['/tmp/evil', '0', 'x']], 'absolute_path'],
      ['a .. path', [['../evil', '0', 'x']], 'parent_segment'],
      ['a symlink out', [['l', '2', '../../../../etc']], 'link_out'],
      [
        'a write through an inside link',
        [
          ['d/', '5'],
          ['l', '2', 'd'],
          ['l/x', '0', 'x'],
        ],
        'through_link',
      ],
      ['a block device', [['sda', '4']], 'unsupported_entry'],
    ] as const)('refuses %s and writes nothing outside', async (_what, entries, expected) => {
      expect(await rule(craftedBundle(entries as unknown as [string, string, string?][]))).toBe(expected);
      expect(existsSync(join(root, '..', 'evil'))).toBe(false);
      expect(readdirSync(root).sort()).toEqual(['b.tar.gz', 'out']);
    });

    it('refuses too many files', async () => {
      const many = craftedBundle(Array.from({ length: 6 }, (_, i) => [`f${i}`, '0', 'x'] as const));
      expect(await rule(many, { ...BUNDLE_LIMITS, maxFiles: 5 })).toBe('too_many_files');
    });

    it('refuses too many bytes', async () => {
      const big = bundleOf({ big: randomBytes(10_000) }).content;
      expect(await rule(big, { ...BUNDLE_LIMITS, maxUnpackedBytes: 9_999 })).toBe('too_big');
    });
  });

  describe('BundleCache', () => {
    const serving = (bytes: Buffer, counter: { n: number }) => async () => {
      counter.n++;
      return Readable.from([bytes.subarray(0, 100), bytes.subarray(100)]);
    };

    it('downloads a miss once, verifies it, serves the hit from disk', async () => {
      const b = bundleOf({ 'main.js': 'console.log(1)' });
      const cache = new BundleCache({ root, capBytes: 1024 * 1024 }, log);
      const count = { n: 0 };
      const [one, two] = await Promise.all([
        cache.acquire(b.digest, serving(b.content, count)),
        cache.acquire(b.digest, serving(b.content, count)),
      ]);
      expect(count.n).toBe(1); // concurrent misses share the download
      expect(one.dir).toBe(join(root, b.digest));
      expect(readFileSync(join(one.dir, 'main.js'), 'utf8')).toBe('console.log(1)');
      one.release();
      two.release();
      const three = await cache.acquire(b.digest, serving(b.content, count));
      expect({ downloads: count.n, downloaded: three.downloaded }).toEqual({
        downloads: 1,
        downloaded: false,
      });
      // A restarted worker finds it on disk.
      const again = new BundleCache({ root, capBytes: 1024 * 1024 }, log);
      await again.acquire(b.digest, serving(b.content, count));
      expect(count.n).toBe(1);
    });

    it('refuses bytes whose SHA-256 is not the digest, and keeps nothing of them', async () => {
      const b = bundleOf({ 'a.js': '1' });
      const other = bundleOf({ 'a.js': '2' });
      const cache = new BundleCache({ root, capBytes: 1024 * 1024 }, log);
      const error = await cache.acquire(b.digest, serving(other.content, { n: 0 })).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BundleUnavailableError);
      expect((error as BundleUnavailableError).reason).toBe('digest_mismatch');
      expect(cache.has(b.digest)).toBe(false);
      expect(readdirSync(root).filter((n) => n !== '.tmp')).toEqual([]);
      expect(readdirSync(join(root, '.tmp'))).toEqual([]);
    });

    it('refuses a malicious bundle the control plane would never have served (defence in depth)', async () => {
      const evil = craftedBundle([['l', '2', '/etc']]);
      const digest = createHash('sha256').update(evil).digest('hex');
      const cache = new BundleCache({ root, capBytes: 1024 * 1024 }, log);
      const error = await cache.acquire(digest, serving(evil, { n: 0 })).catch((e: unknown) => e);
      expect((error as BundleUnavailableError).reason).toBe('link_out');
      expect(existsSync(join(root, digest))).toBe(false);
    });

    it('over the cap evicts the least recently used bundle, never one still held', async () => {
      const [a, b, c] = ['a', 'b', 'c'].map((n) => bundleOf({ [`${n}.bin`]: randomBytes(600) }));
      const cache = new BundleCache({ root, capBytes: 1300 }, log);
      const count = { n: 0 };
      const useA = await cache.acquire(a!.digest, serving(a!.content, count));
      const useB = await cache.acquire(b!.digest, serving(b!.content, count));
      // Both held (running attempts): c comes, the cache is over its cap, and nothing can go.
      const useC = await cache.acquire(c!.digest, serving(c!.content, count));
      expect([a, b, c].map((x) => cache.has(x!.digest))).toEqual([true, true, true]);
      expect(cache.bytes).toBe(1800);
      useA.release();
      useB.release();
      useC.release();
      // a is used again: b is now the least recently used; the next acquire brings the cache under its cap.
      (await cache.acquire(a!.digest, serving(a!.content, count))).release();
      expect([a, b, c].map((x) => cache.has(x!.digest))).toEqual([true, false, true]);
      expect(existsSync(join(root, b!.digest))).toBe(false);
      expect(cache.bytes).toBe(1200);
      expect(count.n).toBe(3);
    });
  });
});
