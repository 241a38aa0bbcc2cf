import { randomBytes } from 'node:crypto';
import { link, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { ProcessIdentity, identityOf, isSameProcessAlive } from '../host/process-table';
import { createFileExclusive, syncFolder } from './durable-files';

export const LOCK_FILE = 'journal.lock';

/** Another live process owns the journal folder; the worker must not start (R-WRK-1). */
export class JournalLockedError extends Error {
  override readonly name = 'JournalLockedError';
}

interface LockContent extends ProcessIdentity {
  readonly workerId: string;
  readonly nonce: string;
  readonly since: string;
}

function readLock(text: string): LockContent | null {
  try {
    const v = JSON.parse(text) as Partial<LockContent>;
    if (!Number.isSafeInteger(v.pid) || typeof v.nonce !== 'string') return null;
    return v as LockContent;
  } catch {
    return null;
  }
}

/**
 * Single ownership of a journal folder: `journal.lock` holds the owner's process identity (boot id,
 * pid, start time). It is created with link(2), which fails if the file exists. A lock whose owner
 * is certainly gone (other boot, no such pid, or a pid reused by a process that started later) is
 * stale and taken over: renamed away, re-checked byte for byte, then created anew.
 */
export class JournalLock {
  private constructor(
    private readonly dir: string,
    private readonly bytes: string,
  ) {}

  static async acquire(dir: string, workerId: string, now: Date): Promise<JournalLock> {
    const content: LockContent = {
      ...identityOf(process.pid),
      workerId,
      nonce: randomBytes(16).toString('hex'),
      since: now.toISOString(),
    };
    const bytes = `${JSON.stringify(content)}\n`;
    const path = join(dir, LOCK_FILE);
    for (let tries = 0; tries < 3; tries++) {
      if (await createFileExclusive(dir, LOCK_FILE, bytes)) return new JournalLock(dir, bytes);
      let found: string;
      try {
        found = await readFile(path, 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue; // released meanwhile
        throw error;
      }
      const holder = readLock(found);
      if (holder === null) {
        throw new JournalLockedError(
          `journal ${dir} has an unreadable ${LOCK_FILE}; check that no worker uses this folder, then remove it`,
        );
      }
      if (isSameProcessAlive(holder)) {
        throw new JournalLockedError(
          `journal ${dir} is in use by worker ${holder.workerId} (pid ${holder.pid}, since ${holder.since}); ` +
            'each worker process needs its own QL_WORKER_JOURNAL_DIR',
        );
      }
      await JournalLock.removeStale(dir, found);
    }
    throw new JournalLockedError(`journal ${dir}: ${LOCK_FILE} keeps changing; another worker is starting`);
  }

  /** Moves the stale lock aside; if what moved is not what was judged stale, puts it back and fails. */
  private static async removeStale(dir: string, judged: string): Promise<void> {
    const aside = join(dir, `.stale-${randomBytes(8).toString('hex')}`);
    try {
      await rename(join(dir, LOCK_FILE), aside);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    const moved = await readFile(aside, 'utf8');
    if (moved !== judged) {
      await link(aside, join(dir, LOCK_FILE)).catch(() => undefined);
      await unlink(aside);
      throw new JournalLockedError(`journal ${dir}: another worker took ${LOCK_FILE} at the same moment`);
    }
    await unlink(aside);
    await syncFolder(dir);
  }

  /** Removes the lock if it is still this one. */
  async release(): Promise<void> {
    const path = join(this.dir, LOCK_FILE);
    const current = await readFile(path, 'utf8').catch(() => null);
    if (current !== this.bytes) return;
    await unlink(path);
    await syncFolder(this.dir);
  }
}
