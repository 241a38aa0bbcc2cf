// ADR 0051: the worker's side of bundles on a real disk — crafted archives refused again while
// unpacking (nothing left behind), the digest checked, the cache's LRU cap that never evicts a bundle
// an attempt holds, concurrent misses sharing one download, and each attempt's fresh copy (issue 19:
// a spare made ahead, within the cap).
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  statSync,
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
    /** Every entry under `dir`: path → content (files), target (links), and mode. */
    const treeOf = (dir: string, sub = ''): Record<string, string> => {
      const out: Record<string, string> = {};
      for (const name of readdirSync(join(dir, sub)).sort()) {
        const rel = sub ? `${sub}/${name}` : name;
        const stat = lstatSync(join(dir, rel));
        const mode = (stat.mode & 0o777).toString(8);
        if (stat.isDirectory()) Object.assign(out, { [rel]: `dir ${mode}` }, treeOf(dir, rel));
        else out[rel] = `${mode} ${readFileSync(join(dir, rel), 'utf8')}`;
      }
      return out;
    };
    /** What a careless or hostile script does to its working folder. */
    const vandalize = (dir: string) => {
      writeFileSync(join(dir, 'lib/a.js'), 'poisoned');
      rmSync(join(dir, 'run.sh'));
      chmodSync(join(dir, 'lib/b.js'), 0o777);
      writeFileSync(join(dir, 'lib/b.js'), 'poisoned too');
      writeFileSync(join(dir, 'extra.txt'), 'left behind');
    };

    it('gives each attempt a fresh copy: a spare made after the last attempt, renamed into place; nothing an attempt does reaches the cache, the spare or the next copy', async () => {
      const b = bundleOf({ 'run.sh': 'echo hi\n', 'lib/a.js': 'A', 'lib/b.js': 'B' });
      const cache = new BundleCache({ root, capBytes: 1024 * 1024 }, log);
      const count = { n: 0 };
      const attempts = mkdtempSync(join(tmpdir(), 'ql-attempts-'));
      try {
        const first = await cache.acquire(b.digest, serving(b.content, count));
        await first.copyTo(join(attempts, '1'));
        const original = treeOf(join(attempts, '1'));
        expect(original).toEqual(treeOf(first.dir));
        expect(cache.sparesTaken).toBe(0); // nothing made yet: copied now
        vandalize(join(attempts, '1'));
        first.release();
        await cache.sparesMade();
        expect(treeOf(join(root, '.spare', b.digest))).toEqual(original);
        for (const n of ['2', '3']) {
          const use = await cache.acquire(b.digest, serving(b.content, count));
          await use.copyTo(join(attempts, n));
          expect(existsSync(join(root, '.spare', b.digest))).toBe(false); // taken: a rename
          expect(treeOf(join(attempts, n))).toEqual(original);
          vandalize(join(attempts, n));
          use.release();
          await cache.sparesMade();
        }
        expect(cache.sparesTaken).toBe(2);
        expect(treeOf(join(root, b.digest))).toEqual(original);
        expect(count.n).toBe(1);
        // A restarted worker keeps the bundles, not the spares (it makes new ones).
        const again = new BundleCache({ root, capBytes: 1024 * 1024 }, log);
        const use = await again.acquire(b.digest, serving(b.content, count));
        expect(existsSync(join(root, '.spare'))).toBe(false);
        await use.copyTo(join(attempts, '4'));
        expect(treeOf(join(attempts, '4'))).toEqual(original);
      } finally {
        rmSync(attempts, { recursive: true, force: true });
      }
    });

    it('makes a spare only within the cap beside the bundles, and drops spares first when a bundle needs room', async () => {
      const [a, b] = ['a', 'b'].map((n) => bundleOf({ [`${n}.bin`]: randomBytes(600) }));
      const cache = new BundleCache({ root, capBytes: 1300 }, log);
      const count = { n: 0 };
      (await cache.acquire(a!.digest, serving(a!.content, count))).release();
      await cache.sparesMade();
      expect(cache.spareBytes).toBe(600); // a 600 + its spare 600 ≤ 1300
      const useB = await cache.acquire(b!.digest, serving(b!.content, count));
      // a, b and a's spare would be 1800: the spare went, both bundles stay.
      expect({ a: cache.has(a!.digest), b: cache.has(b!.digest), spares: cache.spareBytes }).toEqual({
        a: true,
        b: true,
        spares: 0,
      });
      expect(existsSync(join(root, '.spare', a!.digest))).toBe(false);
      useB.release();
      await cache.sparesMade();
      expect(cache.spareBytes).toBe(0); // 1200 + 600 > 1300: no spare for b
      expect(readdirSync(join(root, '.spare'))).toEqual([]);
    });

    const shm = '/dev/shm';
    const otherDisk = existsSync(shm) && statSync(shm).dev !== statSync(tmpdir()).dev;
    (otherDisk ? it : it.skip)(
      'work folders on another filesystem: the spare cannot be renamed there, the attempt gets a copy, and no spare is made again',
      async () => {
        const b = bundleOf({ 'a.js': 'A' });
        const warn = jest.fn();
        const cache = new BundleCache({ root, capBytes: 1024 * 1024 }, { ...log, warn });
        const attempts = mkdtempSync(join(shm, 'ql-attempts-'));
        try {
          (await cache.acquire(b.digest, serving(b.content, { n: 0 }))).release();
          await cache.sparesMade();
          const use = await cache.acquire(b.digest, serving(b.content, { n: 0 }));
          await use.copyTo(join(attempts, '1'));
          expect(readFileSync(join(attempts, '1', 'a.js'), 'utf8')).toBe('A');
          expect(warn).toHaveBeenCalledWith(expect.stringContaining('two filesystems'), expect.anything());
          use.release();
          await cache.sparesMade();
          expect(readdirSync(join(root, '.spare'))).toEqual([]);
        } finally {
          rmSync(attempts, { recursive: true, force: true });
        }
      },
    );
  });
});
