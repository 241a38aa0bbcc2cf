import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat, utimes, writeFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { BundleArchiveError } from '@ql/contracts';
import type { WorkerLog } from '../logging/worker-log';
import { removeTree } from '../executor/work-folders';
import { copyTree } from './copy-tree';
import { unpackBundle } from './unpack-bundle';

const DIGEST = /^[0-9a-f]{64}$/;
/** Next to each unpacked bundle: its unpacked size, so a restarted worker knows the cache's size. */
const SIZE_FILE = (digest: string) => `${digest}.size`;
/** Spare copies, one per digest at most, made ahead of the attempt that takes one. */
const SPARES = '.spare';

export interface BundleCacheOptions {
  /** QL_WORKER_BUNDLE_CACHE_DIR: unpacked bundles, one folder per digest. */
  readonly root: string;
  /** QL_WORKER_BUNDLE_CACHE_MB in bytes: what the unpacked bundles may hold together. */
  readonly capBytes: number;
}

/** A cached bundle in use: its folder stays until `release()`. */
export interface BundleUse {
  readonly dir: string;
  /** True when this use downloaded it; false when the cache had it. */
  readonly downloaded: boolean;
  /**
   * A fresh copy of the bundle at `dest` (which must not exist): the spare copy made beforehand when
   * there is one (a rename), else a copy now. Nothing an attempt did to its copy is in either.
   */
  copyTo(dest: string): Promise<void>;
  release(): void;
}

/** The bundle could not be had: the attempt does not start (`bundle_unavailable`). */
export class BundleUnavailableError extends Error {
  override readonly name = 'BundleUnavailableError';
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Issue 19 item 3 (ADR 0051): unpacked bundles by digest under the worker's data folder. A miss
 * downloads (the caller's fenced fetch), streams to a temporary file while hashing, checks the digest,
 * unpacks under the archive rules into a temporary folder and renames it into place (a folder named
 * by a digest is always complete). Least recently used bundles go once the cache is over its cap,
 * never one an attempt holds (`acquire` → `release`); one bigger than the cap alone stays while used.
 * Concurrent misses of one digest share one download.
 */
export class BundleCache {
  private readonly inUse = new Map<string, number>();
  private readonly loading = new Map<string, Promise<void>>();
  private readonly sizes = new Map<string, number>();
  /** The order of last use (this process); a restarted worker takes it from the folders' mtimes. */
  private readonly lastUse = new Map<string, number>();
  private useSeq = 0;
  private scanned: Promise<void> | null = null;
  /** Digests with a spare copy ready under `.spare/` (their unpacked size counts against the cap). */
  private readonly spares = new Set<string>();
  /** Spare copies being made (each holds its bundle, so it is not evicted meanwhile). */
  private readonly refilling = new Map<string, Promise<void>>();
  /** Set when a spare could not be renamed into an attempt's folder (another filesystem): none made after. */
  private sparesUseless = false;
  /** Downloads this process made (tests and logs). */
  downloads = 0;
  /** Copies given to attempts by renaming a spare (tests and the bench). */
  sparesTaken = 0;

  constructor(
    private readonly options: BundleCacheOptions,
    private readonly log: WorkerLog,
  ) {}

  /**
   * The unpacked folder of `digest`, held for the caller until `release()`. `fetch` opens the fenced
   * download (only called on a miss); `maxBytes` bounds the archive it may answer.
   */
  async acquire(digest: string, fetch: (maxBytes: number) => Promise<Readable>): Promise<BundleUse> {
    if (!DIGEST.test(digest)) throw new RangeError('digest must be SHA-256 hex');
    await (this.scanned ??= this.scan());
    this.hold(digest);
    let downloaded = false;
    try {
      if (!this.sizes.has(digest)) {
        let pending = this.loading.get(digest);
        if (!pending) {
          downloaded = true;
          pending = this.load(digest, fetch).finally(() => this.loading.delete(digest));
          this.loading.set(digest, pending);
        }
        await pending;
      }
      const dir = join(this.options.root, digest);
      this.lastUse.set(digest, ++this.useSeq);
      // Used now: the folder's mtime keeps the order across a restart.
      const now = new Date();
      await utimes(dir, now, now).catch(() => undefined);
      await this.evict();
      let released = false;
      return {
        dir,
        downloaded,
        copyTo: (dest) => this.copyTo(digest, dest),
        release: () => {
          if (released) return;
          released = true;
          this.drop(digest);
          this.refill(digest);
        },
      };
    } catch (error) {
      this.drop(digest);
      throw error;
    }
  }

  /** The bytes the cached bundles hold (unpacked), as recorded. */
  get bytes(): number {
    let total = 0;
    for (const size of this.sizes.values()) total += size;
    return total;
  }

  /** The bytes the spare copies hold. */
  get spareBytes(): number {
    let total = 0;
    for (const digest of this.spares) total += this.sizes.get(digest) ?? 0;
    return total;
  }

  /** The spare copy becomes the attempt's (a rename), or the cached folder is copied now. */
  private async copyTo(digest: string, dest: string): Promise<void> {
    if (this.spares.delete(digest)) {
      try {
        await rename(join(this.options.root, SPARES, digest), dest);
        this.sparesTaken++;
        return;
      } catch (error) {
        await removeTree(join(this.options.root, SPARES, digest)).catch(() => undefined);
        if ((error as NodeJS.ErrnoException).code === 'EXDEV' && !this.sparesUseless) {
          this.sparesUseless = true;
          this.log.warn('the bundle cache and the work folders are on two filesystems: no spare copies', {
            digest,
          });
        }
      }
    }
    await copyTree(join(this.options.root, digest), dest);
  }

  /**
   * After an attempt let the bundle go: its next copy made now, while nothing waits for it, if the
   * cache has room for it beside the bundles (within the cap) and none is ready or being made.
   */
  private refill(digest: string): void {
    if (this.sparesUseless || this.spares.has(digest) || this.refilling.has(digest)) return;
    const size = this.sizes.get(digest);
    if (size === undefined || this.bytes + this.spareBytes + size > this.options.capBytes) return;
    this.hold(digest);
    const spares = join(this.options.root, SPARES);
    const tmp = join(spares, `.${digest}-${randomBytes(6).toString('hex')}`);
    const making = (async () => {
      try {
        await mkdir(spares, { recursive: true, mode: 0o700 });
        await copyTree(join(this.options.root, digest), tmp);
        await rename(tmp, join(spares, digest));
        this.spares.add(digest);
      } catch (error) {
        await removeTree(tmp).catch(() => undefined);
        this.log.warn('could not make a spare copy of a bundle', { digest, error: String(error) });
      } finally {
        this.refilling.delete(digest);
        this.drop(digest);
      }
    })();
    this.refilling.set(digest, making);
  }

  /** Resolves once the spare copies being made now are made (or failed). */
  async sparesMade(): Promise<void> {
    await Promise.all(this.refilling.values());
  }

  has(digest: string): boolean {
    return this.sizes.has(digest);
  }

  private hold(digest: string): void {
    this.inUse.set(digest, (this.inUse.get(digest) ?? 0) + 1);
  }

  private drop(digest: string): void {
    const left = (this.inUse.get(digest) ?? 1) - 1;
    if (left > 0) this.inUse.set(digest, left);
    else this.inUse.delete(digest);
  }

  private async load(digest: string, fetch: (maxBytes: number) => Promise<Readable>): Promise<void> {
    const root = this.options.root;
    const tmp = join(root, '.tmp');
    await mkdir(tmp, { recursive: true, mode: 0o700 });
    const base = join(tmp, `${digest}-${randomBytes(6).toString('hex')}`);
    const archive = `${base}.tar.gz`;
    try {
      const stream = await fetch(this.options.capBytes);
      const hash = createHash('sha256');
      let bytes = 0;
      stream.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        hash.update(chunk);
      });
      await pipeline(stream, createWriteStream(archive, { mode: 0o600 })).catch((error: unknown) => {
        throw new BundleUnavailableError('download_failed', `the download ended early: ${String(error)}`);
      });
      this.downloads++;
      const got = hash.digest('hex');
      if (got !== digest)
        throw new BundleUnavailableError(
          'digest_mismatch',
          `the download's SHA-256 is ${got}, not ${digest}`,
        );
      let unpacked: number;
      try {
        unpacked = (await unpackBundle(archive, base)).unpackedBytes;
      } catch (error) {
        if (error instanceof BundleArchiveError)
          throw new BundleUnavailableError(error.rule, `the bundle breaks an unpack rule: ${error.message}`);
        throw error;
      }
      await writeFile(join(root, SIZE_FILE(digest)), String(unpacked), { mode: 0o600 });
      await rename(base, join(root, digest));
      this.sizes.set(digest, unpacked);
      this.log.info('bundle downloaded', { digest, bytes, unpackedBytes: unpacked });
    } finally {
      await rm(archive, { force: true }).catch(() => undefined);
      await removeTree(base).catch(() => undefined);
    }
  }

  /** At first use: what a previous process left (complete folders with their sizes); the rest goes. */
  private async scan(): Promise<void> {
    const root = this.options.root;
    await mkdir(root, { recursive: true, mode: 0o700 });
    await removeTree(join(root, '.tmp')).catch(() => undefined);
    await removeTree(join(root, SPARES)).catch(() => undefined);
    const found: { digest: string; usedMs: number }[] = [];
    for (const name of await readdir(root)) {
      if (!DIGEST.test(name)) continue;
      const size = Number(await readFile(join(root, SIZE_FILE(name)), 'utf8').catch(() => 'NaN'));
      const folder = await stat(join(root, name)).catch(() => null);
      if (folder && Number.isSafeInteger(size) && size >= 0) {
        this.sizes.set(name, size);
        found.push({ digest: name, usedMs: folder.mtimeMs });
      } else await removeTree(join(root, name)).catch(() => undefined);
    }
    found.sort((a, b) => a.usedMs - b.usedMs);
    for (const { digest } of found) this.lastUse.set(digest, ++this.useSeq);
  }

  /**
   * Spare copies first (oldest use first) until the bundles and the spares fit the cap; then the
   * bundles, oldest use first, skipping those in use, until they fit it.
   */
  private async evict(): Promise<void> {
    const byUse = (a: string, b: string) => (this.lastUse.get(a) ?? 0) - (this.lastUse.get(b) ?? 0);
    for (const digest of [...this.spares].sort(byUse)) {
      if (this.bytes + this.spareBytes <= this.options.capBytes) break;
      await this.dropSpare(digest);
    }
    if (this.bytes <= this.options.capBytes) return;
    const candidates = [...this.sizes.keys()]
      .filter((digest) => !this.inUse.has(digest) && !this.loading.has(digest))
      .sort(byUse);
    for (const digest of candidates) {
      if (this.bytes <= this.options.capBytes) return;
      await this.dropSpare(digest);
      this.sizes.delete(digest);
      this.lastUse.delete(digest);
      await removeTree(join(this.options.root, digest));
      await rm(join(this.options.root, SIZE_FILE(digest)), { force: true });
      this.log.info('bundle evicted from the cache', { digest, cacheBytes: this.bytes });
    }
  }

  private async dropSpare(digest: string): Promise<void> {
    if (this.spares.delete(digest)) await removeTree(join(this.options.root, SPARES, digest));
  }
}
