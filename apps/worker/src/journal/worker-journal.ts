import { IllegalStateError } from '@ql/domain';
import { mkdir, readFile, readdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { TEMP_PREFIX, createFileExclusive, syncFolder, writeFileAtomic } from './durable-files';
import { JournalLock } from './journal-lock';
import {
  JOURNAL_RECORD_SCHEMA,
  JournalCorruptError,
  JournalRecord,
  RecordedExit,
  RecordedOutcome,
  RecordedProcess,
  parseJournalRecord,
  validateJournalRecord,
} from './journal-record';
import { JOURNAL_LIMITS, JournalState, assertJournalTransition, isFinished } from './journal-states';

export interface WorkerJournalOptions {
  readonly dir: string;
  readonly workerId: string;
  /** Records kept at most; finished ones beyond it are pruned oldest first. */
  readonly maxRecords: number;
  readonly now?: () => Date;
}

export interface AcceptedOffer {
  readonly offerId: string;
  readonly runId: string;
  readonly attemptId: string;
  readonly leaseGeneration: number;
  readonly leaseToken: string;
  readonly specDigest: string;
}

/** Fields a step may add; the state decides which are required (checked before writing). */
export interface JournalPatch {
  readonly process?: RecordedProcess;
  readonly exit?: RecordedExit;
  readonly outcome?: RecordedOutcome;
  readonly recoveryReason?: string;
}

export interface JournalPage {
  readonly records: readonly JournalRecord[];
  /** Keyset cursor for the next page; null after the last one. */
  readonly next: string | null;
}

/** Every record slot holds an unfinished run: accepting one more would break the bound. */
export class JournalFullError extends Error {
  override readonly name = 'JournalFullError';
}

const RECORD_FILE = /^([0-9a-f-]{36})\.json$/;
const fileOf = (offerId: string) => `${offerId}.json`;

/**
 * The worker's durable journal of accepted runs (R-WRK-1, R-WRK-2): one 0600 file per record in a
 * 0700 folder, every write a temp file + fsync + rename + folder fsync, owned by one process through
 * `journal.lock`. The constructor touches nothing; `open()` creates the folder, takes the lock and
 * loads every record. Writes run one after another. Each record is also kept in memory, exactly as it
 * was last written (or loaded): steps, `get` and `page` read that copy, never the file again — the
 * journal is the folder's one owner, so the file cannot hold anything else (ADR 0023).
 */
export class WorkerJournal {
  private lock: JournalLock | undefined;
  /** Every record as its file holds it (set only once the write is durable), by offer id. */
  private readonly records = new Map<string, JournalRecord>();
  private chain: Promise<unknown> = Promise.resolve();
  private readonly now: () => Date;

  constructor(private readonly options: WorkerJournalOptions) {
    if (
      !Number.isInteger(options.maxRecords) ||
      options.maxRecords < 1 ||
      options.maxRecords > JOURNAL_LIMITS.maxRecords
    ) {
      throw new RangeError(`journal maxRecords must be 1..${JOURNAL_LIMITS.maxRecords}`);
    }
    this.now = options.now ?? (() => new Date());
  }

  get dir(): string {
    return this.options.dir;
  }

  get isOpen(): boolean {
    return this.lock !== undefined;
  }

  /** Creates the folder (0700), refuses one others can read, takes the lock, loads every record. */
  async open(): Promise<void> {
    if (this.lock) throw new IllegalStateError('journal is already open');
    const { dir } = this.options;
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const info = await stat(dir);
    if (!info.isDirectory()) throw new Error(`journal ${dir} is not a folder`);
    if ((info.mode & 0o077) !== 0) {
      throw new Error(
        `journal ${dir} has mode ${(info.mode & 0o777).toString(8)}; it holds lease tokens and must be 0700`,
      );
    }
    this.lock = await JournalLock.acquire(dir, this.options.workerId, this.now());
    try {
      await this.loadRecords();
    } catch (error) {
      await this.close();
      throw error;
    }
  }

  async close(): Promise<void> {
    await this.chain.catch(() => undefined);
    const lock = this.lock;
    this.lock = undefined;
    this.records.clear();
    await lock?.release();
  }

  /** Records held now (finished ones included). */
  get size(): number {
    return this.records.size;
  }

  /** A new record in `accepted`; prunes finished records first if the journal is full. */
  accept(offer: AcceptedOffer): Promise<JournalRecord> {
    return this.serial(async () => {
      if (this.records.has(offer.offerId))
        throw new IllegalStateError(`offer ${offer.offerId} is already journaled`);
      // No folder fsync for these unlinks: the create below fsyncs the same folder, which makes them
      // durable too; and a finished record that came back after a crash would only be pruned again.
      await this.pruneTo(this.options.maxRecords - 1, false);
      if (this.records.size >= this.options.maxRecords) {
        throw new JournalFullError(
          `journal ${this.options.dir} holds ${this.records.size} unfinished records (QL_WORKER_JOURNAL_MAX_RECORDS=${this.options.maxRecords})`,
        );
      }
      const at = this.now().toISOString();
      const record = validateJournalRecord({
        schema: JOURNAL_RECORD_SCHEMA,
        ...offer,
        state: 'accepted',
        createdAt: at,
        updatedAt: at,
        process: null,
        exit: null,
        outcome: null,
        recoveryReason: null,
      } satisfies JournalRecord);
      if (!(await createFileExclusive(this.options.dir, fileOf(offer.offerId), serialize(record)))) {
        throw new IllegalStateError(`offer ${offer.offerId} is already journaled`);
      }
      return this.keep(record);
    });
  }

  /** Moves a record along the table (illegal steps throw, nothing written); finished drops the token. */
  transition(offerId: string, to: JournalState, patch: JournalPatch = {}): Promise<JournalRecord> {
    return this.serial(async () => {
      const current = this.read(offerId);
      assertJournalTransition(current.state, to);
      const next = await this.write({
        ...current,
        ...patch,
        state: to,
        leaseToken: isFinished(to) ? null : current.leaseToken,
      });
      if (isFinished(to)) await this.pruneTo(this.options.maxRecords);
      return next;
    });
  }

  /** Adds what happened without a state change (the process exited; the outcome to report). */
  update(offerId: string, patch: Pick<JournalPatch, 'exit' | 'outcome'>): Promise<JournalRecord> {
    return this.serial(async () => this.write({ ...this.read(offerId), ...patch }));
  }

  /** How many records are in `state` (the memory copy: no file is read). */
  countInState(state: JournalState): number {
    let n = 0;
    for (const record of this.records.values()) if (record.state === state) n++;
    return n;
  }

  async get(offerId: string): Promise<JournalRecord | null> {
    this.assertOpen();
    return this.records.get(offerId) ?? null;
  }

  /** One keyset page in offer-id order (uuidv7: oldest first), `limit` ≤ 64. */
  async page(after: string | null, limit: number = JOURNAL_LIMITS.maxPage): Promise<JournalPage> {
    this.assertOpen();
    if (!Number.isInteger(limit) || limit < 1 || limit > JOURNAL_LIMITS.maxPage) {
      throw new RangeError(`journal page size must be 1..${JOURNAL_LIMITS.maxPage}`);
    }
    const ids = [...this.records.keys()].sort().filter((id) => after === null || id > after);
    const records = ids.slice(0, limit).map((id) => this.records.get(id)!);
    return { records, next: ids.length > limit ? ids[limit - 1]! : null };
  }

  /** Every record, page by page. */
  async *pages(limit: number = JOURNAL_LIMITS.maxPage): AsyncGenerator<readonly JournalRecord[]> {
    let after: string | null = null;
    do {
      const page: JournalPage = await this.page(after, limit);
      if (page.records.length) yield page.records;
      after = page.next;
    } while (after !== null);
  }

  /**
   * The operator's step (`journal resolve`, ADR 0029): removes a `recovery_required` record once the
   * operator checked that nothing of its run still runs. Any other record, or an unknown one, throws
   * and nothing changes.
   */
  resolveRecovery(offerId: string): Promise<JournalRecord> {
    return this.serial(async () => {
      const record = this.read(offerId);
      if (record.state !== 'recovery_required') {
        throw new IllegalStateError(`offer ${offerId} is ${record.state}, not recovery_required`);
      }
      await unlink(join(this.options.dir, fileOf(offerId)));
      await syncFolder(this.options.dir);
      this.records.delete(offerId);
      return record;
    });
  }

  /** Removes finished records, oldest change first, until at most `keep` records remain. */
  prune(keep: number = this.options.maxRecords): Promise<number> {
    return this.serial(() => this.pruneTo(keep));
  }

  private async pruneTo(keep: number, syncAfter = true): Promise<number> {
    const excess = this.records.size - keep;
    if (excess <= 0) return 0;
    const finished = [...this.records.entries()]
      .filter(([, v]) => isFinished(v.state))
      .sort(([a, x], [b, y]) =>
        x.updatedAt === y.updatedAt ? (a < b ? -1 : 1) : x.updatedAt < y.updatedAt ? -1 : 1,
      )
      .slice(0, excess);
    for (const [id] of finished) {
      await unlink(join(this.options.dir, fileOf(id)));
      this.records.delete(id);
    }
    if (finished.length && syncAfter) await syncFolder(this.options.dir);
    return finished.length;
  }

  private async loadRecords(): Promise<void> {
    const { dir } = this.options;
    for (const name of await readdir(dir)) {
      if (name.startsWith(TEMP_PREFIX) || name.startsWith('.stale-')) {
        await unlink(join(dir, name)); // a write or takeover cut short by a crash
        continue;
      }
      const match = RECORD_FILE.exec(name);
      if (!match) continue;
      const record = parseJournalRecord(await readFile(join(dir, name), 'utf8'), name);
      if (record.offerId !== match[1]) {
        throw new JournalCorruptError(`journal record ${name} names another offer`);
      }
      this.keep(record);
    }
  }

  /** The record as last written or loaded; throws if the journal does not hold it. */
  private read(offerId: string): JournalRecord {
    this.assertOpen();
    const record = this.records.get(offerId);
    if (!record) throw new IllegalStateError(`offer ${offerId} is not in the journal`);
    return record;
  }

  /** Validated, written durably, and only then the memory copy (a failed write leaves the old one). */
  private async write(record: JournalRecord): Promise<JournalRecord> {
    const next = validateJournalRecord({ ...record, updatedAt: this.now().toISOString() });
    await writeFileAtomic(this.options.dir, fileOf(next.offerId), serialize(next));
    return this.keep(next);
  }

  /** Frozen, so no caller can change the copy the next step starts from. */
  private keep(record: JournalRecord): JournalRecord {
    for (const part of [record.process, record.exit, record.outcome]) if (part) Object.freeze(part);
    this.records.set(record.offerId, Object.freeze(record));
    return record;
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    if (!this.lock) return Promise.reject(new IllegalStateError('journal is not open; call open() first'));
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  private assertOpen(): void {
    if (!this.lock) throw new IllegalStateError('journal is not open; call open() first');
  }
}

function serialize(record: JournalRecord): string {
  return `${JSON.stringify(record)}\n`;
}
