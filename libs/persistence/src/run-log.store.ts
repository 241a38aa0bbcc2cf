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
  redactText,
  truncationMarker,
  utf8Length,
} from '@ql/domain';
import { StoredLease, leaseTermViolation } from './lease-fence';
import { SqlDatabase, SqlExecutor, isTrue, toInt, toMs } from './sql-executor';

/** What the activation repository hands over: the caller's lease, its locked run, its attempt. */
interface Held {
  lease: StoredLease;
  run: RunRecord;
  attempt: { id: string; status: string };
  now: number;
}
type Hold = (tx: SqlExecutor, command: LeaseFenceCommand) => Promise<Held>;
/** The secret values to redact from a run's output (ADR 0050); empty when its revision maps none. */
export type RedactionSource = (tx: SqlExecutor, run: RunRecord) => Promise<string[]>;

/** Attempts whose redaction values are known (the values the attempt was given stay what it had). */
const REDACTION_CACHE_MAX = 256;

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
  constructor(
    private readonly db: SqlDatabase,
    private readonly hold: Hold,
    private readonly capBytes: number = RUN_LOG_LIMITS.defaultRunCapBytes,
    private readonly redaction?: RedactionSource,
  ) {}

  private readonly redactions = new Map<string, string[]>();

  /** `text` with every secret value of the run replaced by `***` (the worker did so too; this is again). */
  private async redact(tx: SqlExecutor, run: RunRecord, attemptId: string, text: string): Promise<string> {
    if (!this.redaction) return text;
    let values = this.redactions.get(attemptId);
    if (!values) {
      values = await this.redaction(tx, run);
      if (this.redactions.size >= REDACTION_CACHE_MAX)
        this.redactions.delete(this.redactions.keys().next().value!);
      this.redactions.set(attemptId, values);
    }
    return redactText(text, values);
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
    const command = { ...given, text: await this.redact(tx, run, attempt.id, given.text) };
    const counters = await tx.one<{
      log_next_seq: number | string;
      log_bytes: number | string;
      log_truncated: number | boolean;
    }>(
      `SELECT a.log_next_seq, r.log_bytes, r.log_truncated FROM attempts a JOIN runs r ON r.id = a.run_id
       WHERE a.id = :id`,
      { id: attempt.id },
    );
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
      const stored = await tx.one<{ text: string; stream: LogStream | null }>(
        'SELECT text, stream FROM run_logs WHERE attempt_id = :id AND seq = :seq',
        { id: attempt.id, seq: command.seq },
      );
      // A replay is the same text from the same stream (ADR 0032); anything else is another chunk.
      if (stored && (stored.text !== command.text || stored.stream !== command.stream))
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
    await tx.run(
      `INSERT INTO run_logs (run_id, position, attempt_id, seq, kind, stream, text, at)
       SELECT :runId, COALESCE(MAX(position), 0) + 1, :attemptId, :seq, :kind, :stream, :text, {now}
       FROM run_logs WHERE run_id = :runId`,
      {
        runId: run.id,
        attemptId: attempt.id,
        seq: store ? command.seq : null,
        kind: store ? 'output' : 'truncated',
        stream: store ? command.stream : 'system',
        text: store ? command.text : truncationMarker(this.capBytes),
      },
    );
    await tx.run(
      store
        ? 'UPDATE runs SET log_bytes = log_bytes + :bytes WHERE id = :runId'
        : 'UPDATE runs SET log_truncated = :yes WHERE id = :runId',
      store ? { bytes, runId: run.id } : { yes: true, runId: run.id },
    );
    return { runId: run.id, outcome: store ? 'stored' : 'dropped', truncated: !store };
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
