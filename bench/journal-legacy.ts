/**
 * The journal's write path before ADR 0041, kept for the `journal` bench only (nothing else imports
 * it): one 0600 file per record, every step a fresh temp file + write + fsync + rename (`link` for an
 * accept) + fsync of the folder, through the promise-based fs API, steps chained one after another,
 * the memory copy as ADR 0023 made it. Copied from `apps/worker/src/journal/durable-files.ts` and the
 * step methods of `worker-journal.ts` as they were; opening, the lock and paging are left out (no
 * step uses them).
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { link, mkdir, open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import {
  JournalRecord,
  acceptedRecord,
  freezeRecord,
  validateJournalRecord,
} from '../apps/worker/src/journal/journal-record';
import { JournalState, assertJournalTransition, isFinished } from '../apps/worker/src/journal/journal-states';
import type { AcceptedOffer, JournalPatch } from '../apps/worker/src/journal/worker-journal';

async function syncFolder(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function writeTempFile(dir: string, bytes: string): Promise<string> {
  const path = join(dir, `.tmp-${randomBytes(8).toString('hex')}`);
  const handle = await open(path, 'wx', 0o600);
  try {
    await handle.chmod(0o600);
    await handle.writeFile(bytes, 'utf8');
    await handle.sync();
  } finally {
    await handle.close();
  }
  return path;
}

async function writeFileAtomic(dir: string, name: string, bytes: string): Promise<void> {
  const temp = await writeTempFile(dir, bytes);
  try {
    await rename(temp, join(dir, name));
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw error;
  }
  await syncFolder(dir);
}

async function createFileExclusive(dir: string, name: string, bytes: string): Promise<boolean> {
  const temp = await writeTempFile(dir, bytes);
  try {
    await link(temp, join(dir, name));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await unlink(temp);
    await syncFolder(dir);
  }
}

const fileOf = (offerId: string) => `${offerId}.json`;
const serialize = (record: JournalRecord) => `${JSON.stringify(record)}\n`;

export class LegacyJournal {
  private readonly records = new Map<string, JournalRecord>();
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly dir: string,
    private readonly maxRecords: number,
  ) {}

  async open(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
  }

  accept(offer: AcceptedOffer): Promise<JournalRecord> {
    return this.serial(async () => {
      await this.pruneTo(this.maxRecords - 1, false);
      const record = validateJournalRecord(acceptedRecord(offer, new Date().toISOString()));
      if (!(await createFileExclusive(this.dir, fileOf(offer.offerId), serialize(record)))) {
        throw new Error(`offer ${offer.offerId} is already journaled`);
      }
      return this.keep(record);
    });
  }

  transition(offerId: string, to: JournalState, patch: JournalPatch = {}): Promise<JournalRecord> {
    return this.serial(async () => {
      const current = this.records.get(offerId)!;
      assertJournalTransition(current.state, to);
      const next = await this.write({
        ...current,
        ...patch,
        state: to,
        leaseToken: isFinished(to) ? null : current.leaseToken,
      });
      if (isFinished(to)) await this.pruneTo(this.maxRecords);
      return next;
    });
  }

  update(offerId: string, patch: Pick<JournalPatch, 'exit' | 'outcome'>): Promise<JournalRecord> {
    return this.serial(async () => this.write({ ...this.records.get(offerId)!, ...patch }));
  }

  private async pruneTo(keep: number, syncAfter = true): Promise<void> {
    const excess = this.records.size - keep;
    if (excess <= 0) return;
    const finished = [...this.records.entries()]
      .filter(([, v]) => isFinished(v.state))
      .sort(([a, x], [b, y]) =>
        x.updatedAt === y.updatedAt ? (a < b ? -1 : 1) : x.updatedAt < y.updatedAt ? -1 : 1,
      )
      .slice(0, excess);
    for (const [id] of finished) {
      await unlink(join(this.dir, fileOf(id)));
      this.records.delete(id);
    }
    if (finished.length && syncAfter) await syncFolder(this.dir);
  }

  private async write(record: JournalRecord): Promise<JournalRecord> {
    const next = validateJournalRecord({ ...record, updatedAt: new Date().toISOString() });
    await writeFileAtomic(this.dir, fileOf(next.offerId), serialize(next));
    return this.keep(next);
  }

  private keep(record: JournalRecord): JournalRecord {
    this.records.set(record.offerId, freezeRecord(record));
    return record;
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }
}
