import { Dirent } from 'node:fs';
import { chmod, lchown, lstat, readdir, rmdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { JournalRecord } from '../journal/journal-record';
import { isFinished } from '../journal/journal-states';
import type { WorkerLog } from '../logging/worker-log';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface WorkFolderOptions {
  /** QL_WORKER_WORK_DIR: one folder per launched attempt, named by its offer id. */
  readonly root: string;
  /** QL_WORKER_KEEP_FAILED_RUNS: failed attempts' folders kept for debugging, newest first. */
  readonly keepFailedRuns: number;
  /** QL_WORKER_KEEP_FAILED_BYTES: and together at most this many bytes. */
  readonly keepFailedBytes: number;
}

/** The journal as the folders see it: the record of an offer, if it still has one. */
export interface JournalLookup {
  get(offerId: string): Promise<JournalRecord | null>;
}

/**
 * Issue 16 item 12 (ADR 0038): a work folder goes once the journal records its attempt finished
 * (`completion_acknowledged` or `start_failed`) — never before, so the executor's `work_dir_exists`
 * guard still stops a second launch of an attempt the journal does not call finished. A succeeded
 * attempt's folder is removed at once; a failed, timed-out, cancelled, lost or start-failed one is kept
 * for debugging while it is among the newest `keepFailedRuns` such folders and they stay within
 * `keepFailedBytes`, oldest removed first. Folders of unfinished records (a run going, a record in
 * `recovery_required`) are never touched; a folder whose record was pruned counts as a finished one.
 */
export class WorkFolders {
  /** One settle or sweep at a time: two runs ending together never remove the same tree at once. */
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly options: WorkFolderOptions,
    private readonly log: WorkerLog,
  ) {}

  /** After the attempt of `offerId` ended here: remove or keep its folder, then apply the bound. */
  settle(journal: JournalLookup, offerId: string): Promise<void> {
    return this.serial(() => this.settleNow(journal, offerId));
  }

  /** At start, after the restart scan: the folders of finished records a previous process left. */
  sweep(journal: JournalLookup): Promise<void> {
    return this.serial(() => this.sweepNow(journal));
  }

  private serial(fn: () => Promise<void>): Promise<void> {
    const next = this.chain.then(fn);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async settleNow(journal: JournalLookup, offerId: string): Promise<void> {
    const record = await journal.get(offerId);
    if (record === null || !isFinished(record.state)) return;
    if (succeeded(record)) await this.remove(offerId);
    else await this.bound(journal);
  }

  private async sweepNow(journal: JournalLookup): Promise<void> {
    for (const offerId of await this.folders()) {
      const record = await journal.get(offerId);
      if (record !== null && isFinished(record.state) && succeeded(record)) await this.remove(offerId);
    }
    await this.bound(journal);
  }

  /** The kept folders (finished, not succeeded, or no record left) within both bounds, oldest out first. */
  private async bound(journal: JournalLookup): Promise<void> {
    const kept: { offerId: string; mtimeMs: number }[] = [];
    for (const offerId of await this.folders()) {
      const record = await journal.get(offerId);
      if (record !== null && !isFinished(record.state)) continue;
      const stat = await lstat(join(this.options.root, offerId)).catch(() => null);
      if (stat?.isDirectory()) kept.push({ offerId, mtimeMs: stat.mtimeMs });
    }
    kept.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.offerId < b.offerId ? 1 : -1));
    // The newest ones, as many as fit both bounds; the first that does not fit and every older one go.
    let bytes = 0;
    let full = false;
    for (const [index, folder] of kept.entries()) {
      if (!full && index < this.options.keepFailedRuns) {
        bytes += await treeBytes(join(this.options.root, folder.offerId));
        if (bytes <= this.options.keepFailedBytes) continue;
      }
      full = true;
      await this.remove(folder.offerId);
    }
  }

  private async folders(): Promise<string[]> {
    const entries = await readdir(this.options.root, { withFileTypes: true }).catch(() => [] as Dirent[]);
    return entries.filter((e) => e.isDirectory() && UUID.test(e.name)).map((e) => e.name);
  }

  private async remove(offerId: string): Promise<void> {
    const path = join(this.options.root, offerId);
    try {
      await removeTree(path);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? String(error);
      this.log.warn('could not remove a work folder; the next run or start tries again', {
        offerId,
        path,
        code,
      });
    }
  }
}

function succeeded(record: JournalRecord): boolean {
  return record.state === 'completion_acknowledged' && record.outcome?.status === 'succeeded';
}

/** Bytes of the files under `path` that the worker can read (a folder it cannot enter counts 0). */
async function treeBytes(path: string): Promise<number> {
  const entries = await readdir(path, { withFileTypes: true }).catch(() => [] as Dirent[]);
  let total = 0;
  for (const entry of entries) {
    const child = join(path, entry.name);
    if (entry.isDirectory()) total += await treeBytes(child);
    else total += (await lstat(child).catch(() => null))?.size ?? 0;
  }
  return total;
}

/**
 * Removes a folder tree whatever modes the task left: each folder is first made the worker's own
 * (`lchown`, which a root worker may do with CAP_CHOWN alone — it has no CAP_DAC_OVERRIDE or
 * CAP_FOWNER to enter a task user's 0700 folder) and 0700, then emptied and removed; files and
 * symbolic links are only unlinked (never followed, never chowned). Runs only after every process of
 * the attempt is gone.
 */
export async function removeTree(path: string): Promise<void> {
  const stat = await lstat(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return null;
    throw error;
  });
  if (stat === null) return;
  if (!stat.isDirectory()) return unlink(path);
  const uid = process.getuid?.() ?? stat.uid;
  const gid = process.getgid?.() ?? stat.gid;
  if (stat.uid !== uid || stat.gid !== gid) await lchown(path, uid, gid).catch(() => undefined);
  await chmod(path, 0o700).catch(() => undefined);
  for (const name of await readdir(path)) await removeTree(join(path, name));
  await rmdir(path);
}
