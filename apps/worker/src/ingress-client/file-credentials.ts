import { readFileSync, statSync } from 'node:fs';
import { monotonicNow } from '../host/monotonic';
import type { WorkerCredentialsProvider, WorkerTlsCredentials } from './worker-ingress-https.client';

/**
 * A file whose last change is this close to the moment it was read may change again without its
 * stat changing (timestamps are coarse: a kernel tick, or whole seconds on some file systems), so its
 * bytes are not trusted from the cache until the change is older than this ("racy" files, as git's index).
 */
export const RACY_CHANGE_NS = 2_000_000_000n;

/** How long trusted credentials are used before the files are looked at again (issue 17). */
export const CHECK_EVERY_MS = 1000;

export interface FileCredentialsOptions {
  /** Wall clock in ns, for tests; the file systems' timestamps are on the same clock. */
  readonly nowNs?: () => bigint;
  /** Monotonic ms, for tests. */
  readonly monotonicMs?: () => number;
  /** Trusted credentials are returned without a stat for this long (0: stat on every call). */
  readonly checkEveryMs?: number;
}

/**
 * The worker's PEM files, checked again at most every `CHECK_EVERY_MS` so a rotated certificate is
 * used within a second, without a restart (R-WIRE-4); between checks a call costs no system call at
 * all. A check stats the three files and reads them again only when one of them changed — device, inode, size, mtime or ctime in ns: a new file renamed over the old one and a
 * rewrite in place (same size, same second, even with the mtime put back: ctime moves) both show —
 * or when a change was too recent to be sure of (`RACY_CHANGE_NS`). Otherwise it returns the very same
 * buffers as last time, which lets the client skip hashing them (ADR 0023).
 */
export function fileCredentials(
  paths: { caPath: string; certPath: string; keyPath: string },
  options: FileCredentialsOptions = {},
): FileCredentials {
  const nowNs = options.nowNs ?? (() => BigInt(Date.now()) * 1_000_000n);
  const monotonicMs = options.monotonicMs ?? monotonicNow;
  const checkEveryMs = options.checkEveryMs ?? CHECK_EVERY_MS;
  const files = [paths.caPath, paths.certPath, paths.keyPath] as const;
  let cached: { readonly key: string; readonly credentials: WorkerTlsCredentials } | undefined;
  let checkedAt = -Infinity;
  const provider = async () => {
    if (cached && monotonicMs() - checkedAt < checkEveryMs) return cached.credentials;
    checkedAt = monotonicMs();
    const statAt = nowNs();
    // Synchronous on purpose: three stats of local files take microseconds, a thread-pool round trip
    // per file cost more than the stat itself (issue 17: 4 % of a busy worker's CPU).
    const stats = files.map((path) => statSync(path, { bigint: true }));
    const key = stats.map((s) => `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`).join('|');
    if (cached?.key === key) return cached.credentials;
    // Stat first, read after: a change landing between the two moves the stat, so the next call reads again.
    const [caPem, certPem, keyPem] = files.map((path) => readFileSync(path));
    const credentials = { caPem: caPem!, certPem: certPem!, keyPem: keyPem! };
    const lastChange = stats.reduce((max, s) => (s.ctimeNs > max ? s.ctimeNs : max), 0n);
    // Any change after `statAt` gets a later ctime than `lastChange` (the tick is far below the margin).
    cached = statAt - lastChange >= RACY_CHANGE_NS ? { key, credentials } : undefined;
    return credentials;
  };
  // The renewer renamed new files into place: the next call looks at them, not in a second.
  return Object.assign(provider, { recheck: () => void (checkedAt = -Infinity) });
}

/** The provider, and `recheck()`: the files changed (a renewal), look at them on the next call. */
export type FileCredentials = WorkerCredentialsProvider & { recheck(): void };
