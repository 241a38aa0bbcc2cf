import { randomBytes } from 'node:crypto';
import { readFileSync, unlinkSync } from 'node:fs';
import { KernelLock, takeKernelLock } from '@ql/contracts';
import { join } from 'node:path';
import { ProcessIdentity, identityOf, isSameProcessAlive } from '../host/process-table';
import { syncFolder, writeFileAtomic } from './durable-files';

/** The owner's identity (information for people and error messages; the kernel lock decides). */
export const LOCK_FILE = 'journal.lock';
/** The file the kernel lock is held on, for the owner's whole life; never removed (ADR 0029). */
export const KERNEL_LOCK_FILE = 'journal.lock.sqlite';

/** Another live process owns the journal folder; the worker must not start (R-WRK-1). */
export class JournalLockedError extends Error {
  override readonly name = 'JournalLockedError';
}

interface LockContent extends ProcessIdentity {
  readonly workerId: string;
  readonly nonce: string;
  readonly since: string;
  /** Present since ADR 0029: the owner also holds the kernel lock on KERNEL_LOCK_FILE. */
  readonly kernelLock?: string;
}

function readLock(text: string | null): LockContent | null {
  if (text === null) return null;
  try {
    const v = JSON.parse(text) as Partial<LockContent>;
    if (!Number.isSafeInteger(v.pid) || typeof v.nonce !== 'string') return null;
    return v as LockContent;
  } catch {
    return null;
  }
}

/**
 * Single ownership of a journal folder (ADR 0029). The proof is a kernel lock: an fcntl write lock on
 * `journal.lock.sqlite`, taken through SQLite (better-sqlite3: Node has no flock/fcntl API) in
 * exclusive locking mode and held until the process closes it or dies. The kernel releases it when
 * its owner dies, keeps it while the owner is frozen (SIGSTOP, a paused VM), and sees one lock for
 * every process on the host whatever its PID namespace (two containers on one volume). `journal.lock`
 * names the owner (worker id, boot id, pid, start time) for error messages only: a pid from another
 * PID namespace proves nothing, so it never decides.
 */
export class JournalLock {
  private constructor(
    private readonly dir: string,
    private readonly bytes: string,
    private readonly held: KernelLock,
  ) {}

  static async acquire(dir: string, workerId: string, now: Date): Promise<JournalLock> {
    const path = join(dir, LOCK_FILE);
    const holder = readLock(readIfThere(path));
    const held = takeKernelLock(join(dir, KERNEL_LOCK_FILE));
    if (held === null) {
      const who = holder
        ? `worker ${holder.workerId} (pid ${holder.pid}${holder.bootId ? ` on boot ${holder.bootId}` : ''}, since ${holder.since})`
        : 'another process';
      throw new JournalLockedError(
        `journal ${dir} is in use by ${who}: a live process holds its kernel lock (${KERNEL_LOCK_FILE}); ` +
          'each worker process needs its own QL_WORKER_JOURNAL_DIR',
      );
    }
    try {
      // A lock file of a worker from before ADR 0029 (no kernel lock): its live owner still refuses us.
      if (holder && holder.kernelLock === undefined && isSameProcessAlive(holder)) {
        throw new JournalLockedError(
          `journal ${dir} is in use by worker ${holder.workerId} (pid ${holder.pid}, since ${holder.since}); ` +
            'each worker process needs its own QL_WORKER_JOURNAL_DIR',
        );
      }
      const content: LockContent = {
        ...identityOf(process.pid),
        workerId,
        nonce: randomBytes(16).toString('hex'),
        since: now.toISOString(),
        kernelLock: KERNEL_LOCK_FILE,
      };
      const bytes = `${JSON.stringify(content)}\n`;
      // Whatever `journal.lock` held, its owner no longer holds the kernel lock: it is stale.
      writeFileAtomic(dir, LOCK_FILE, bytes);
      return new JournalLock(dir, bytes, held);
    } catch (error) {
      held.close();
      throw error;
    }
  }

  /** Removes the identity file if it is still this one, then lets go of the kernel lock. */
  async release(): Promise<void> {
    try {
      const path = join(this.dir, LOCK_FILE);
      if (readIfThere(path) === this.bytes) {
        unlinkSync(path);
        syncFolder(this.dir);
      }
    } finally {
      if (this.held.open) this.held.close();
    }
  }
}

function readIfThere(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}
