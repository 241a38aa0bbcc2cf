import {
  FencedError,
  LeaseFenceCommand,
  StoredLogChunk,
  LogChunkCommand,
  LogEntry,
  LogPage,
  LogStream,
  RUN_LOG_LIMITS,
  RunRecord,
  decideLogChunk,
  isTerminalRun,
  truncationMarker,
  utf8Length,
} from '@ql/domain';
import { StoredLease, leaseTermViolation } from './lease-fence';
import { SqlDatabase, SqlExecutor, isTrue, toInt, toMs } from './sql-executor';
import { LogRedactor, RedactedChunk, RedactionSource } from './run-log-redaction';

export type { RedactionSource } from './run-log-redaction';

/** What the activation repository hands over: the caller's lease, its locked run, its attempt. */
interface Held {
  lease: StoredLease;
  run: RunRecord;
  attempt: { id: string; status: string };
  now: number;
}
type Hold = (tx: SqlExecutor, command: LeaseFenceCommand) => Promise<Held>;
interface LogRow {
  position: number | string;
  attempt_id: string;
  seq: number | null;
  kind: 'output' | 'truncated';
  stream: LogStream | null;
  text: string;
  at: number | Date;
}

/**
 * R-CMP-2: a run's output in `run_logs`, chunks sequenced per attempt (0, 1, …) and numbered per run
 * (position 1..n) under the run's row lock; the run's stored bytes stay within the cap.
 */
export class LogStore {
  private readonly redactor: LogRedactor;

  constructor(
    private readonly db: SqlDatabase,
    private readonly hold: Hold,
    private readonly capBytes: number = RUN_LOG_LIMITS.defaultRunCapBytes,
    redaction?: RedactionSource,
  ) {
    this.redactor = new LogRedactor(redaction);
  }

  /** `text` (a completion's error summary) with the attempt's values as `***` (ADR 0050). */
  async redactText(tx: SqlExecutor, run: RunRecord, attemptId: string, text: string): Promise<string> {
    const patterns = await this.redactor.patterns(tx, run, attemptId);
    return patterns ? this.redactor.redact(patterns, text) : text;
  }

  /** Whether an attempt's end must take the transaction path: it holds output back (PostgreSQL's one statement stores none). */
  async holdsOutput(offerId: string): Promise<boolean> {
    const row = await this.db.one<{ log_held: string | null }>(
      'SELECT a.log_held FROM run_leases l JOIN attempts a ON a.id = l.attempt_id WHERE l.offer_id = :offerId',
      { offerId },
    );
    return Boolean(row?.log_held);
  }

  // Same fence and lock order as an acknowledgement; a stored chunk replays even after the attempt ended.
  async append(command: LogChunkCommand): Promise<StoredLogChunk> {
    return this.db.transaction(async (tx) => this.appendHeld(tx, await this.hold(tx, command), command));
  }

  /**
   * One chunk under the hold the caller's transaction took: the `logs` route, and a completion's
   * final output before its state change (ADR 0044). A refusal throws, so the caller's transaction
   * rolls back whatever it wrote before.
   */
  async appendHeld(
    tx: SqlExecutor,
    { lease, run, attempt, now }: Held,
    given: Pick<LogChunkCommand, 'seq' | 'stream' | 'text' | 'leaseVersion'>,
  ): Promise<StoredLogChunk> {
    const counters = await tx.one<{
      log_next_seq: number | string;
      log_held: string | null;
      log_bytes: number | string;
      log_truncated: number | boolean;
    }>(
      `SELECT a.log_next_seq, a.log_held, r.log_bytes, r.log_truncated FROM attempts a JOIN runs r ON r.id = a.run_id
       WHERE a.id = :id`,
      { id: attempt.id },
    );
    // Redacted as part of the stream (what the chunks before held back first), not alone (issue 27 item 1).
    const patterns = await this.redactor.patterns(tx, run, attempt.id);
    const redacted: RedactedChunk | null = patterns
      ? this.redactor.chunk(patterns, attempt.id, counters!.log_held, given.stream, given.text)
      : null;
    const command = { ...given, text: redacted ? redacted.text : given.text };
    const truncated = isTrue(counters!.log_truncated);
    const bytes = utf8Length(command.text);
    const decision = decideLogChunk({
      seq: command.seq,
      nextSeq: toInt(counters!.log_next_seq),
      bytes,
      runLogBytes: toInt(counters!.log_bytes),
      truncated,
      capBytes: this.capBytes,
    });
    if (decision.kind === 'seen') {
      const stored = await tx.one<{ text: string; stream: LogStream | null; text_mac: string | null }>(
        'SELECT text, stream, text_mac FROM run_logs WHERE attempt_id = :id AND seq = :seq',
        { id: attempt.id, seq: command.seq },
      );
      // A replay is the same text from the same stream (ADR 0032); anything else is another chunk. A
      // redacted chunk is known by the MAC of its text as it came (a key removed since: unknowable).
      const same = !stored
        ? true
        : stored.text_mac && redacted
          ? this.redactor.sameChunk(given.stream, given.text, stored.text_mac) !== false
          : stored.text === command.text;
      if (stored && (!same || stored.stream !== command.stream))
        throw new FencedError('lease', 'log_chunk_mismatch');
      return { runId: run.id, outcome: stored ? 'replayed' : 'dropped', truncated };
    }
    const fault = leaseTermViolation(lease, command.leaseVersion, now);
    if (fault) throw new FencedError('lease', fault);
    if (attempt.status !== 'starting' && attempt.status !== 'running')
      throw new FencedError('lease', 'attempt_not_starting');
    if (decision.kind === 'gap') throw new FencedError('lease', 'log_sequence_gap');
    await tx.run('UPDATE attempts SET log_next_seq = log_next_seq + 1 WHERE id = :id', { id: attempt.id });
    if (decision.kind === 'drop') return { runId: run.id, outcome: 'dropped', truncated: true };
    const store = decision.kind === 'store';
    const chunk = {
      seq: command.seq,
      stream: command.stream,
      text: command.text,
      mac: redacted?.mac ?? null,
    };
    await this.insert(tx, run.id, attempt.id, store ? chunk : null);
    if (store && redacted && redacted.held !== counters!.log_held)
      await tx.run('UPDATE attempts SET log_held = :held WHERE id = :id', {
        held: redacted.held,
        id: attempt.id,
      });
    return { runId: run.id, outcome: store ? 'stored' : 'dropped', truncated: !store };
  }

  /**
   * The attempt ends (in its ending transaction): what its streams still hold back is stored after
   * its last chunk, as written when the worker ended it (`end`), hidden when a sweep did (`cut`).
   */
  async flushHeld(tx: SqlExecutor, run: RunRecord, attemptId: string, how: 'end' | 'cut'): Promise<void> {
    if (!this.redactor.active) return; // nothing is ever held without a key
    const row = await tx.one<{
      log_held: string | null;
      log_bytes: number | string;
      log_truncated: number | boolean;
    }>(
      `SELECT a.log_held, r.log_bytes, r.log_truncated FROM attempts a JOIN runs r ON r.id = a.run_id
       WHERE a.id = :id`,
      { id: attemptId },
    );
    if (!row?.log_held) return;
    await tx.run('UPDATE attempts SET log_held = NULL WHERE id = :id', { id: attemptId });
    const patterns = await this.redactor.patterns(tx, run, attemptId);
    if (!patterns || isTrue(row.log_truncated)) return;
    let bytes = toInt(row.log_bytes);
    for (const { stream, text } of this.redactor.flush(patterns, attemptId, row.log_held, how)) {
      const size = utf8Length(text);
      if (size === 0) continue;
      const fits = bytes + size <= this.capBytes;
      await this.insert(tx, run.id, attemptId, fits ? { seq: null, stream, text, mac: null } : null);
      if (!fits) return;
      bytes += size;
    }
  }

  /** One row: a chunk (its seq null for a flushed tail), or the cap's marker (null), and the run's counters. */
  private async insert(
    tx: SqlExecutor,
    runId: string,
    attemptId: string,
    chunk: { seq: number | null; stream: LogStream | null; text: string | null; mac: string | null } | null,
  ): Promise<void> {
    const text = chunk?.text ?? null;
    await tx.run(
      `INSERT INTO run_logs (run_id, position, attempt_id, seq, kind, stream, text, text_mac, at)
       SELECT :runId, COALESCE(MAX(position), 0) + 1, :attemptId, :seq, :kind, :stream, :text, :mac, {now}
       FROM run_logs WHERE run_id = :runId`,
      {
        runId,
        attemptId,
        seq: chunk?.seq ?? null,
        kind: text !== null ? 'output' : 'truncated',
        stream: text !== null ? chunk!.stream : 'system',
        text: text ?? truncationMarker(this.capBytes),
        mac: chunk?.mac ?? null,
      },
    );
    await tx.run(
      text !== null
        ? 'UPDATE runs SET log_bytes = log_bytes + :bytes WHERE id = :runId'
        : 'UPDATE runs SET log_truncated = :yes WHERE id = :runId',
      text !== null ? { bytes: utf8Length(text), runId } : { yes: true, runId },
    );
  }

  // The run's status is read first: once it says ended, every entry was written before that read.
  async read(runId: string, query: { after: number; limit: number }): Promise<LogPage | null> {
    const run = await this.db.one<{ status: RunRecord['status']; log_truncated: number | boolean }>(
      'SELECT status, log_truncated FROM runs WHERE id = :runId',
      { runId },
    );
    if (!run) return null;
    const rows = await this.db.many<LogRow>(
      `SELECT position, attempt_id, seq, kind, stream, text, at FROM run_logs
       WHERE run_id = :runId AND position > :after ORDER BY position LIMIT :limit`,
      { runId, after: query.after, limit: Math.min(Math.max(query.limit, 1), RUN_LOG_LIMITS.maxPage) },
    );
    return {
      entries: rows.map(toEntry),
      runEnded: isTerminalRun(run.status),
      truncated: isTrue(run.log_truncated),
    };
  }
}

function toEntry(row: LogRow): LogEntry {
  return {
    position: toInt(row.position),
    attemptId: row.attempt_id,
    seq: row.seq === null ? null : toInt(row.seq),
    kind: row.kind,
    stream: row.stream,
    raw: row.text,
    at: toMs(row.at),
  };
}
