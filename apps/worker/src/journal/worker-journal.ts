import { IllegalStateError } from '@ql/domain';
import { mkdirSync, readFileSync, readdirSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { TEMP_PREFIX, syncFolder } from './durable-files';
import { JournalLock } from './journal-lock';
import { COMPACTION, CompactionPolicy, JournalLog } from './journal-log';
import type { LogEntry } from './journal-log-format';
import {
  JournalCorruptError,
  JournalRecord,
  RecordedExit,
  RecordedOutcome,
  RecordedProcess,
  acceptedRecord,
  freezeRecord,
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
  /** When the log is rewritten to its live records (ADR 0041); tests lower it. */
  readonly compaction?: CompactionPolicy;
  /** Told when a compaction between steps failed (the log stays as it was; ADR 0041). */
  readonly onCompactionError?: (error: unknown) => void;
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

/**
 * The states whose record must be on disk before the step returns (ADR 0043). Every other step is
 * written lazily — no fdatasync of its own; the next durable step's (or a clean close's) covers it —
 * because a power cut that loses it leaves the journal as a crash just before that step would, which
 * R-WRK-2's table already handles: `accepted` and `starting_acknowledged` lose nothing that ran
 * (`launching` is synced before any spawn, and it makes them durable too), a lost
 * `running_acknowledged`, `completion_acknowledged` or `start_failed` is reported again and the
 * control plane replays or refuses it. Durable: `launching` (never re-spawn an attempt that may have
 * run), `started` (a power cut during a long run is then reported, not left to an operator), the exit
 * and outcome (`update`: a result that cannot be recomputed) and `recovery_required`.
 */
export const DURABLE_STATES: ReadonlySet<JournalState> = new Set<JournalState>([
  'launching',
  'started',
  'recovery_required',
]);

/** Per-record files of a worker from before ADR 0041: read once at open, moved into the log. */
const RECORD_FILE = /^([0-9a-f-]{36})\.json$/;

/**
 * The worker's durable journal of accepted runs (R-WRK-1, R-WRK-2): an append-only log
 * (`journal.log`, 0600) in a 0700 folder, owned by one process through `journal.lock`. Every step
 * is one checksummed frame and one write, by synchronous calls (ADR 0041), with an fdatasync where
 * `DURABLE_STATES` says a power cut must not lose it (ADR 0043); the log is
 * compacted between steps once it holds far more than its live records. The constructor touches
 * nothing; `open()` creates the folder, takes the lock and loads every record. Each record is also
 * kept in memory, exactly as it was last written (or loaded): steps, `get` and `page` read that copy,
 * never the file again — the journal is the folder's one owner, so the file cannot hold anything
 * else (ADR 0023).
 */
export class WorkerJournal {
  private lock: JournalLock | undefined;
  private log: JournalLog | undefined;
  /** Every record as the log holds it (set only once the write returned), by offer id. */
  private readonly records = new Map<string, JournalRecord>();
  private compaction: NodeJS.Immediate | undefined;
  private readonly now: () => Date;

  constructor(private readonly options: WorkerJournalOptions) {
    if (
      !Number.isInteger(options.maxRecords) ||
      options.maxRecords < 1 ||
      options.maxRecords > JOURNAL_LIMITS.maxRecords
    ) {
      throw new RangeError(`journal maxRecords must be 1..${JOURNAL_LIMITS.maxRecords}`);
    }
    const { minBytes, ratio } = options.compaction ?? COMPACTION;
    if (!Number.isSafeInteger(minBytes) || minBytes < 0 || !(ratio >= 1)) {
      throw new RangeError('journal compaction needs minBytes ≥ 0 (an integer) and ratio ≥ 1');
    }
    this.now = options.now ?? (() => new Date());
  }

  get dir(): string {
    return this.options.dir;
  }

  get isOpen(): boolean {
    return this.log !== undefined;
  }

  /** Creates the folder (0700), refuses one others can read, takes the lock, loads every record. */
  async open(): Promise<void> {
    if (this.lock) throw new IllegalStateError('journal is already open');
    const { dir } = this.options;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const info = statSync(dir);
    if (!info.isDirectory()) throw new Error(`journal ${dir} is not a folder`);
    if ((info.mode & 0o077) !== 0) {
      throw new Error(
        `journal ${dir} has mode ${(info.mode & 0o777).toString(8)}; it holds lease tokens and must be 0700`,
      );
    }
    this.lock = await JournalLock.acquire(dir, this.options.workerId, this.now());
    try {
      this.load();
    } catch (error) {
      await this.close();
      throw error;
    }
  }

  async close(): Promise<void> {
    if (this.compaction) clearImmediate(this.compaction);
    this.compaction = undefined;
    const lock = this.lock;
    this.lock = undefined;
    this.log?.close();
    this.log = undefined;
    this.records.clear();
    await lock?.release();
  }

  /** Records held now (finished ones included). */
  get size(): number {
    return this.records.size;
  }

  /** A new record in `accepted`; prunes finished records in the same write if the journal is full. */
  accept(offer: AcceptedOffer): Promise<JournalRecord> {
    return this.step(() => {
      if (this.records.has(offer.offerId))
        throw new IllegalStateError(`offer ${offer.offerId} is already journaled`);
      const del = this.prunable(this.options.maxRecords - 1);
      if (this.records.size - del.length >= this.options.maxRecords) {
        throw new JournalFullError(
          `journal ${this.options.dir} holds ${this.records.size} unfinished records (QL_WORKER_JOURNAL_MAX_RECORDS=${this.options.maxRecords})`,
        );
      }
      const record = validateJournalRecord(acceptedRecord(offer, this.now().toISOString()));
      this.write({ del, put: record }, false);
      return record;
    });
  }

  /** Moves a record along the table (illegal steps throw, nothing written); finished drops the token. */
  transition(offerId: string, to: JournalState, patch: JournalPatch = {}): Promise<JournalRecord> {
    return this.step(() => {
      const current = this.read(offerId);
      assertJournalTransition(current.state, to);
      const next = this.stamp({
        ...current,
        ...patch,
        state: to,
        leaseToken: isFinished(to) ? null : current.leaseToken,
      });
      // Finished records beyond the bound go in the same write (only after the bound was lowered).
      const del = isFinished(to) ? this.prunable(this.options.maxRecords, next) : [];
      this.write({ del, put: next }, DURABLE_STATES.has(to));
      return next;
    });
  }

  /** Adds what happened without a state change (the process exited; the outcome to report). */
  update(offerId: string, patch: Pick<JournalPatch, 'exit' | 'outcome'>): Promise<JournalRecord> {
    return this.step(() => {
      const next = this.stamp({ ...this.read(offerId), ...patch });
      this.write({ put: next }, true);
      return next;
    });
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
    return this.step(() => {
      const record = this.read(offerId);
      if (record.state !== 'recovery_required') {
        throw new IllegalStateError(`offer ${offerId} is ${record.state}, not recovery_required`);
      }
      this.write({ del: [offerId] }, true);
      return record;
    });
  }

  /** Removes finished records, oldest change first, until at most `keep` records remain. */
  prune(keep: number = this.options.maxRecords): Promise<number> {
    return this.step(() => {
      const del = this.prunable(keep);
      if (del.length) this.write({ del }, false);
      return del.length;
    });
  }

  /**
   * The finished records to remove, oldest change first, so that at most `keep` remain — counted
   * with `next` in place of the record it replaces.
   */
  private prunable(keep: number, next?: JournalRecord): string[] {
    const excess = this.records.size - keep;
    if (excess <= 0) return [];
    return [...this.records.values()]
      .map((r) => (next && r.offerId === next.offerId ? next : r))
      .filter((r) => isFinished(r.state))
      .sort((x, y) =>
        x.updatedAt === y.updatedAt ? (x.offerId < y.offerId ? -1 : 1) : x.updatedAt < y.updatedAt ? -1 : 1,
      )
      .slice(0, excess)
      .map((r) => r.offerId);
  }

  /**
   * Removes what a crash cut short (temp files), loads the log and the per-record files of a worker
   * from before ADR 0041, and removes those files once the log holds their records durably.
   */
  private load(): void {
    const { dir } = this.options;
    const older = new Map<string, JournalRecord>();
    for (const name of readdirSync(dir)) {
      if (name.startsWith(TEMP_PREFIX) || name.startsWith('.stale-')) {
        unlinkSync(join(dir, name)); // a write or takeover cut short by a crash
        continue;
      }
      const match = RECORD_FILE.exec(name);
      if (!match) continue;
      const record = parseJournalRecord(readFileSync(join(dir, name), 'utf8'), name);
      if (record.offerId !== match[1]) {
        throw new JournalCorruptError(`journal record ${name} names another offer`);
      }
      older.set(record.offerId, record);
    }
    const { log, records } = JournalLog.open(dir, older, this.options.compaction ?? COMPACTION);
    this.log = log;
    for (const record of records.values()) this.keep(record);
    if (older.size) {
      for (const offerId of older.keys()) unlinkSync(join(dir, `${offerId}.json`));
      syncFolder(dir);
    }
  }

  /** The record as last written or loaded; throws if the journal does not hold it. */
  private read(offerId: string): JournalRecord {
    const record = this.records.get(offerId);
    if (!record) throw new IllegalStateError(`offer ${offerId} is not in the journal`);
    return record;
  }

  /** Validated, with this step's time. */
  private stamp(record: JournalRecord): JournalRecord {
    return validateJournalRecord({ ...record, updatedAt: this.now().toISOString() });
  }

  /**
   * One frame, written (and durable if `durable`) when this returns; only then the memory copy
   * changes (a failed write leaves the old one, which is what the log still holds). The record put
   * is frozen in place.
   */
  private write(entry: LogEntry<JournalRecord>, durable: boolean): void {
    const log = this.log!;
    log.append(durable ? entry : { ...entry, lazy: true });
    for (const offerId of entry.del ?? []) this.records.delete(offerId);
    if (entry.put) this.keep(entry.put);
    if (log.wantsCompaction) this.compactSoon();
  }

  /** Compaction in a later turn of the event loop, never inside a step (ADR 0041). */
  private compactSoon(): void {
    if (this.compaction) return;
    this.compaction = setImmediate(() => {
      this.compaction = undefined;
      if (!this.log?.wantsCompaction) return;
      try {
        this.log.compact(this.records.values());
      } catch (error) {
        this.options.onCompactionError?.(error);
      }
    });
    this.compaction.unref();
  }

  /** Frozen, so no caller can change the copy the next step starts from. */
  private keep(record: JournalRecord): JournalRecord {
    this.records.set(record.offerId, freezeRecord(record));
    return record;
  }

  /**
   * Runs a step now, synchronously (each step is one durable write), and hands its result or error
   * over as a promise: the journal's callers await every step.
   */
  private step<T>(fn: () => T): Promise<T> {
    try {
      this.assertOpen();
      return Promise.resolve(fn());
    } catch (error) {
      return Promise.reject(error);
    }
  }

  private assertOpen(): void {
    if (!this.log) throw new IllegalStateError('journal is not open; call open() first');
  }
}
