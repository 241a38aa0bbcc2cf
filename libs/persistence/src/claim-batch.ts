import { SqlDatabase, SqlParams } from './sql-executor';

/**
 * ADR 0027: claims that arrive at a replica while its claim statement is busy share the next one.
 * No timer: a claim arriving while no claim statement is out goes at once, alone (no added latency at
 * low load); the ones that queue behind a busy statement go out together when it returns, as one
 * call of `ql_claim` per claim inside one statement — one round trip and one commit for the batch.
 * Each claim is still its own fenced call of the same function, with its own answer.
 *
 * A statement that fails as a whole (a `ql_claim` raise, a deadlock with another replica's batch, a
 * connection error) wrote nothing: each of its claims is sent again alone, so one claim's refusal
 * never becomes another's, and a connection error reaches each caller as before.
 */
export interface ClaimBatchOptions {
  /** Claims one statement carries at most; 1 sends each alone (the coalescer is then a pass-through). */
  readonly maxSize: number;
  /** Claim statements in flight at once per replica (1: the measured best on 2 cores, ADR 0027). */
  readonly maxInFlight: number;
}

export const DEFAULT_CLAIM_BATCH: ClaimBatchOptions = { maxSize: 32, maxInFlight: 1 };

/** The named parameters of one `ql_claim` call, in the function's order (see CLAIM_IN_ONE). */
export interface ClaimCallParams {
  readonly workerId: string;
  readonly sessionId: string;
  readonly generation: number;
  readonly expectedVersion: number;
  readonly caps: string | null;
  readonly offerId: string;
  readonly attemptId: string;
  readonly digest: string;
  readonly leaseMs: number;
  readonly match: string;
  readonly holdable: string;
  readonly nomatch: string;
  readonly free: string;
  readonly skip: string;
  readonly holdMs: number;
}

/** The batch: one `ql_claim` per element, in worker-id order (one lock order for every replica). */
const CLAIM_BATCH = `SELECT b.i, c.* FROM jsonb_to_recordset(:batch::jsonb) AS b(i int4, worker_id text,
  session_id uuid, generation int4, expected_version int8, caps text, offer_id uuid, attempt_id uuid,
  digest text, lease_ms int8, match text, holdable text, nomatch text, free text, skip text, hold_ms int8)
  LEFT JOIN LATERAL ql_claim(b.worker_id, b.session_id, b.generation, b.expected_version, b.caps,
  b.offer_id, b.attempt_id, b.digest, b.lease_ms, b.match, b.holdable, b.nomatch, b.free, b.skip,
  b.hold_ms, {clockMs}) c ON true`;

interface Queued<Row> {
  readonly params: ClaimCallParams;
  resolve(row: Row | undefined): void;
  reject(reason: unknown): void;
}

export class ClaimCoalescer<Row extends object> {
  private queue: Queued<Row>[] = [];
  private inFlight = 0;
  /** A statement just returned: claims arriving before the next turn of the event loop wait for it. */
  private settling = false;

  constructor(
    private readonly db: SqlDatabase,
    /** One claim alone: the single statement, with its own error handling. */
    private readonly single: (params: ClaimCallParams) => Promise<Row | undefined>,
    private readonly options: ClaimBatchOptions = DEFAULT_CLAIM_BATCH,
  ) {}

  /** The row `ql_claim` answered for these parameters (undefined: it answered none). */
  call(params: ClaimCallParams): Promise<Row | undefined> {
    if (this.options.maxSize <= 1) return this.single(params);
    return new Promise<Row | undefined>((resolve, reject) => {
      this.queue.push({ params, resolve, reject });
      if (!this.settling) this.pump();
    });
  }

  private pump(): void {
    while (this.queue.length > 0 && this.inFlight < this.options.maxInFlight) {
      const batch = this.queue.splice(0, this.options.maxSize);
      this.inFlight++;
      void this.send(batch).finally(() => {
        this.inFlight--;
        // The callers just answered often pull again at once (a worker with free slots, a long poll
        // handing over): one turn of the event loop lets those claims join the next statement
        // instead of the first of them going alone and the rest queueing behind it.
        this.settling = true;
        setImmediate(() => {
          this.settling = false;
          this.pump();
        });
      });
    }
  }

  private async send(batch: Queued<Row>[]): Promise<void> {
    if (batch.length === 1) return settle(batch[0]!, this.single(batch[0]!.params));
    let rows: (Row & { i: number })[];
    try {
      rows = await this.db.many<Row & { i: number }>(CLAIM_BATCH, batchParams(batch));
    } catch {
      // Nothing of the batch was written: each claim alone, with its own answer or error.
      await Promise.all(batch.map((q) => settle(q, this.single(q.params))));
      return;
    }
    const byIndex = new Map(rows.map((row) => [row.i, row]));
    batch.forEach((q, i) => {
      const row = byIndex.get(i);
      // A LEFT JOIN row with no kind: the function answered no row for this claim.
      q.resolve(row && (row as { kind?: unknown }).kind != null ? row : undefined);
    });
  }
}

async function settle<Row>(q: Queued<Row>, answer: Promise<Row | undefined>): Promise<void> {
  try {
    q.resolve(await answer);
  } catch (error) {
    q.reject(error);
  }
}

function batchParams(batch: readonly Queued<unknown>[]): SqlParams {
  const elements = batch
    .map((q, i) => ({ i, p: q.params }))
    .sort((a, b) => (a.p.workerId < b.p.workerId ? -1 : a.p.workerId > b.p.workerId ? 1 : a.i - b.i))
    .map(({ i, p }) => ({
      i,
      worker_id: p.workerId,
      session_id: p.sessionId,
      generation: p.generation,
      expected_version: p.expectedVersion,
      caps: p.caps,
      offer_id: p.offerId,
      attempt_id: p.attemptId,
      digest: p.digest,
      lease_ms: p.leaseMs,
      match: p.match,
      holdable: p.holdable,
      nomatch: p.nomatch,
      free: p.free,
      skip: p.skip,
      hold_ms: p.holdMs,
    }));
  return { batch: JSON.stringify(elements) };
}
