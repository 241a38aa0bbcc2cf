// Size: starting, running, start-failure, completion and the deadline sweep share one fenced transaction
// (lease → run → worker, lease-fence.ts) and one acknowledgement record; split, that rule would spread.
import {
  ActivationRepository,
  ActivationResult,
  AcknowledgementStatus,
  AttemptSnapshot,
  AttemptStatus,
  CompletionCommand,
  DeadlineSweepResult,
  FencedError,
  IllegalStateError,
  LeaseFenceCommand,
  LeaseRecord,
  LeaseState,
  RunRecord,
  RunningCommand,
  StartFailureCommand,
  StepPayload,
  completionStatus,
  decideAcknowledgement,
  decideRunAfterAttempt,
  deadlinePassed,
  retrySchedule,
  runningDigest,
  startFailureStatus,
  stepDigest,
} from '@ql/domain';
import {
  LEASE_COLUMNS,
  LeaseRow,
  StoredLease,
  assertSessionFence,
  endLease,
  leaseIdentityViolation,
  reportedVersion,
  leaseTermViolation,
  lockRun,
  readFencedLease,
  stripDigest,
  toLease,
} from './lease-fence';
import { applyLeaseStep } from './lease-step.postgres';
import { LogStore, RedactionSource } from './run-log.store';
import {
  ATTEMPT_COLUMNS,
  AttemptRow,
  AttemptSet,
  EventInput,
  Known,
  RUN_COLUMNS,
  RunRow,
  appendRunEvent,
  toAttempt,
  toRun,
  transitionAttempt,
  transitionRun,
  cancelIntentsSql,
} from './run-sql';
import { SqlDatabase, SqlExecutor, SqlTransaction, readNow, toInt, toMs, toMsOrNull } from './sql-executor';
import { SESSION_COLUMNS } from './session-sql';
import { readRevision } from './revision-sql';

interface ActivationRow extends AttemptRow {
  deadline_at: number | Date | null;
  started_at: number | Date | null;
  executor_handle: string | null;
  error_code: string | null;
  callback_seq: number | string;
  ack_starting: string | null;
  ack_running: string | null;
  ack_final: string | null;
}
const ACTIVATION_COLUMNS = `${ATTEMPT_COLUMNS}, deadline_at, started_at, executor_handle, error_code, callback_seq,
  ack_starting, ack_running, ack_final`;

type Attempt = ReturnType<typeof toActivation>;
function toActivation(row: ActivationRow) {
  return {
    ...toAttempt(row),
    deadlineAt: toMsOrNull(row.deadline_at),
    startedAt: toMsOrNull(row.started_at),
    executorHandle: row.executor_handle,
    errorCode: row.error_code,
    callbackSequence: toInt(row.callback_seq),
    recorded: { starting: row.ack_starting, running: row.ack_running, final: row.ack_final },
  };
}

/** The caller's lease, its run (row-locked) and its attempt, read in the lock order of lease-fence.ts. */
interface Held {
  lease: StoredLease;
  run: RunRecord;
  attempt: Attempt;
  now: number;
  /** SQLite: the rows as read, so the step's writes need no RETURNING (ADR 0025). */
  known?: { run: RunRow; attempt: ActivationRow };
}

/** One table's columns in HELD_IN_ONE: `alias_column` in the row, `column` in the table's row type. */
const heldColumns = (alias: string, columns: string) =>
  columns.split(',').map((c) => [`${alias}_${c.trim()}`, c.trim()] as const);
const HELD = {
  w: heldColumns('w', `${SESSION_COLUMNS}, disabled`),
  l: heldColumns('l', LEASE_COLUMNS),
  r: heldColumns('r', RUN_COLUMNS),
  a: heldColumns('a', ACTIVATION_COLUMNS),
};
const select = (alias: keyof typeof HELD) =>
  HELD[alias].map(([as, column]) => `${alias}.${column} AS ${as}`).join(', ');

/**
 * SQLite (ADR 0025): the worker row, the lease, its run and its attempt in one statement. Under BEGIN
 * IMMEDIATE this connection is the only writer, so one read sees what the four reads of the lock
 * order would see; the checks then run in that order on what it returned.
 */
const HELD_IN_ONE = `SELECT ${select('w')}, ${select('l')}, ${select('r')}, ${select('a')}, {now} AS now
  FROM (SELECT 1) AS one
    LEFT JOIN workers w ON w.worker_id = :workerId
    LEFT JOIN run_leases l ON l.offer_id = :offerId
    LEFT JOIN runs r ON r.id = l.run_id
    LEFT JOIN attempts a ON a.id = l.attempt_id`;

/** One table's row from a HELD_IN_ONE row (its first column is its key), or undefined when its join found nothing. */
function part<T>(row: Record<string, unknown>, alias: keyof typeof HELD): T | undefined {
  const columns = HELD[alias];
  if (row[columns[0]![0]] === null) return undefined;
  const out: Record<string, unknown> = {};
  for (const [as, column] of columns) out[column] = row[as];
  return out as T;
}

const LATE = 'attempt.late_callback_ignored';

/**
 * Activation, completion, logs and deadlines on either dialect (R-ACT-1..2, R-CMP-1..2, R-RUN-5..7):
 * each call is one transaction that locks the lease, checks the session after that lock, then locks
 * the run; what it decides comes from the domain's pure functions.
 */
export class SqlActivationRepository implements ActivationRepository {
  private readonly logs: LogStore;
  private readonly redacting: boolean;

  constructor(
    private readonly db: SqlDatabase,
    options: { logCapBytes?: number; redaction?: RedactionSource } = {},
  ) {
    this.redacting = Boolean(options.redaction?.cipher);
    this.logs = new LogStore(
      db,
      (tx, command) => this.hold(tx, command),
      options.logCapBytes,
      options.redaction,
    );
  }

  starting(command: LeaseFenceCommand): Promise<ActivationResult> {
    return this.acknowledge(command, { step: 'starting' });
  }
  running(command: RunningCommand): Promise<ActivationResult> {
    return this.acknowledge(command, { step: 'running', executorHandle: command.executorHandle });
  }
  startFailure(command: StartFailureCommand): Promise<ActivationResult> {
    return this.acknowledge(command, { step: 'start_failure', errorCode: command.errorCode });
  }
  complete(command: CompletionCommand): Promise<ActivationResult> {
    const { outcome, exitCode, errorSummary, executorHandle, finalLogs } = command;
    // The handle and the chunks are part of the payload (ADRs 0047, 0044): only the identical body replays.
    const handle = executorHandle === undefined ? {} : { executorHandle };
    const output = finalLogs?.length ? { finalLogs } : {};
    const payload = { step: 'completion', outcome, exitCode, errorSummary, ...handle, ...output } as const;
    return this.acknowledge(command, payload);
  }

  appendLog: ActivationRepository['appendLog'] = (command) => this.logs.append(command);
  readLogs: ActivationRepository['readLogs'] = (runId, query) => this.logs.read(runId, query);

  // Lease lock → session fence → run lock; a refusal throws and rolls back, so it writes nothing.
  // PostgreSQL applies an accepted step in one statement (ADR 0017); what it did not apply comes here.
  private async acknowledge(command: LeaseFenceCommand, payload: StepPayload): Promise<ActivationResult> {
    const digest = stepDigest(payload);
    const output = payload.step === 'completion' ? (payload.finalLogs ?? []) : [];
    // ql_lease_step stores no output: a completion that carries some takes the transaction (ADR 0044).
    if (
      this.db.dialect === 'postgres' &&
      output.length === 0 &&
      !(await this.redactsOnEnd(command, payload))
    ) {
      const applied = await applyLeaseStep<ActivationRow>(
        this.db,
        command,
        payload,
        digest,
        ACTIVATION_COLUMNS,
      );
      if (applied) {
        const lease = stripDigest(toLease(applied.lease));
        return answer('applied', lease, toRun(applied.run), toActivation(applied.attempt));
      }
    }
    return this.db.transaction(async (tx) => {
      // The final steps may come from the worker's successor session (restart recovery, ADR 0015);
      // output only from the holder, as on the `logs` route.
      const ends = payload.step === 'start_failure' || payload.step === 'completion';
      const successor = ends && output.length === 0 ? 'successor_allowed' : 'holder_only';
      const held = await this.hold(tx, command, successor);
      const { lease, run, attempt, now } = held;
      // A completion with the handle stands in for `running` too (ADR 0047).
      const handle = payload.step === 'completion' ? (payload.executorHandle ?? null) : null;
      const running = handle === null ? null : runningDigest(handle);
      const decision = decideAcknowledgement(
        payload.step,
        digest,
        {
          attemptStatus: attempt.status,
          recorded: attempt.recorded,
          leaseFault: leaseTermViolation(lease, reportedVersion(lease, command), now),
        },
        running,
      );
      switch (decision.kind) {
        case 'refuse':
          throw new FencedError('lease', decision.reason);
        case 'replay':
          return answer(decision.status, lease, run, attempt);
        case 'late':
          // The attempt ended first: its output is not stored, as a `logs` call now would be refused.
          await this.late(tx, run, attempt, payload.step);
          return answer('already_terminal', lease, run, attempt);
        case 'apply': {
          // The output first, each chunk as the `logs` route stores it; a refused one rolls all back.
          for (const chunk of output)
            await this.logs.appendHeld(tx, held, { ...chunk, leaseVersion: command.leaseVersion });
          // `running` first, as if it had come: its slot, its events, then the completion's (ADR 0047).
          const ready = decision.withRunning ? await this.run(tx, held, handle!, running!) : held;
          return this.apply(tx, ready, payload, digest);
        }
      }
    });
  }

  /**
   * An end whose error summary or held-back output the redaction must see first (ADR 0050): the
   * one-statement step stores neither, so such an end takes the transaction.
   */
  private async redactsOnEnd(command: LeaseFenceCommand, payload: StepPayload): Promise<boolean> {
    if (!this.redacting || (payload.step !== 'completion' && payload.step !== 'start_failure')) return false;
    if (payload.step === 'completion' && payload.errorSummary !== null) return true;
    return this.logs.holdsOutput(command.offerId);
  }

  /** The session fence, then whose lease it is; the attempt must still be under this lease generation. */
  private async hold(
    tx: SqlExecutor,
    command: LeaseFenceCommand,
    successor: 'successor_allowed' | 'holder_only' = 'holder_only',
  ): Promise<Held> {
    if (this.db.dialect === 'sqlite') return this.holdInOne(tx, command, successor);
    const { lease, now } = await readFencedLease(tx, command, '{forUpdate}');
    const identity = leaseIdentityViolation(lease, command, successor);
    if (identity || !lease) throw new FencedError('lease', identity ?? 'lease_not_found');
    const run = await lockRun(tx, lease.runId);
    const attempt = await this.attempt(tx, lease.attemptId);
    // An earlier lease of an attempt that was claimed again: its token is fenced for ever (R-LSE-5).
    if (attempt.leaseGeneration !== lease.leaseGeneration) throw new FencedError('lease', 'lease_not_active');
    return { lease, run, attempt, now };
  }

  /** `hold` on SQLite: one read, the same checks in the same order (session, lease, run, attempt). */
  private async holdInOne(
    tx: SqlExecutor,
    command: LeaseFenceCommand,
    successor: 'successor_allowed' | 'holder_only',
  ): Promise<Held> {
    const row = (await tx.one<Record<string, unknown>>(HELD_IN_ONE, {
      workerId: command.workerId,
      offerId: command.offerId,
    }))!;
    const now = toMs(row.now);
    assertSessionFence(part(row, 'w'), command, now);
    const leaseRow = part<LeaseRow>(row, 'l');
    const lease = leaseRow ? toLease(leaseRow) : null;
    const identity = leaseIdentityViolation(lease, command, successor);
    if (identity || !lease) throw new FencedError('lease', identity ?? 'lease_not_found');
    const runRow = part<RunRow>(row, 'r');
    if (!runRow) throw new IllegalStateError(`run ${lease.runId} of a lease is missing`);
    const attemptRow = part<ActivationRow>(row, 'a');
    if (!attemptRow) throw new IllegalStateError(`attempt ${lease.attemptId} of a lease is missing`);
    const attempt = toActivation(attemptRow);
    if (attempt.leaseGeneration !== lease.leaseGeneration) throw new FencedError('lease', 'lease_not_active');
    return { lease, run: toRun(runRow), attempt, now, known: { run: runRow, attempt: attemptRow } };
  }

  private async attempt(tx: SqlExecutor, id: string): Promise<Attempt> {
    const row = await tx.one<ActivationRow>(`SELECT ${ACTIVATION_COLUMNS} FROM attempts WHERE id = :id`, {
      id,
    });
    if (!row) throw new IllegalStateError(`attempt ${id} of a lease is missing`);
    return toActivation(row);
  }

  private async apply(
    tx: SqlTransaction,
    held: Held,
    payload: StepPayload,
    digest: string,
  ): Promise<ActivationResult> {
    const { lease, run, attempt, now, known } = held;
    const knownRun = known && { row: known.run, now };
    const event = (type: EventInput['type'], detail?: EventInput['detail']): EventInput => ({
      type,
      attemptId: attempt.id,
      ...(detail ? { detail } : {}),
    });
    switch (payload.step) {
      case 'starting': {
        const revision = await readRevision(tx, run.taskId, run.revision);
        if (!revision) throw new IllegalStateError(`run ${run.id} pins a missing revision`);
        const moved = await this.moveAttempt(tx, held, 'starting', {
          startedAt: true,
          deadlineMs: revision.spec.timeoutMs,
          ackStarting: digest,
        });
        const runRow = await mustMove(
          tx,
          run,
          run.status,
          [event('attempt.starting', { timeoutMs: revision.spec.timeoutMs })],
          {},
          knownRun,
        );
        return answer('applied', lease, toRun(runRow), moved);
      }
      case 'running': {
        const ran = await this.run(tx, held, payload.executorHandle, digest);
        return answer('applied', lease, ran.run, ran.attempt);
      }
      case 'start_failure': {
        const status = startFailureStatus({
          cancelRequested: run.cancelRequested,
          deadlinePassed: attempt.deadlineAt !== null && attempt.deadlineAt <= now,
        });
        const set = { errorCode: payload.errorCode, ackFinal: digest };
        return this.finish(tx, held, status, set, 'completed', [], { errorCode: payload.errorCode });
      }
      case 'completion': {
        const status = completionStatus(payload.outcome, run.cancelRequested);
        // The summary may quote the output: redacted as the output is, before it is stored.
        const summary = payload.errorSummary;
        const errorSummary =
          summary === null ? null : await this.logs.redactText(tx, run, attempt.id, summary);
        const set = { exitCode: payload.exitCode, errorSummary, ackFinal: digest };
        return this.finish(tx, held, status, set, 'completed', [], {
          reported: payload.outcome,
          exitCode: payload.exitCode,
        });
      }
    }
  }

  /** starting → running, attempt and run (`attempt.running`, `run.running`); the rows as they now are. */
  private async run(tx: SqlExecutor, held: Held, executorHandle: string, digest: string): Promise<Held> {
    const { run, attempt, now, known } = held;
    const set = { executorHandle, ackRunning: digest, callback: true };
    const knownAttempt = known && { row: known.attempt, now };
    const row = await transitionAttempt<ActivationRow>(
      tx,
      attempt,
      'running',
      set,
      ACTIVATION_COLUMNS,
      knownAttempt,
    );
    const events: EventInput[] = [
      { type: 'attempt.running', attemptId: attempt.id },
      { type: 'run.running' },
    ];
    const runRow = await mustMove(tx, run, 'running', events, {}, known && { row: known.run, now });
    const moved = { run: toRun(runRow), attempt: toActivation(row) };
    return { ...held, ...moved, ...(known ? { known: { run: runRow, attempt: row } } : {}) };
  }

  /**
   * Ends the attempt and its lease (the slot comes back), then the run retries or finishes per the
   * pinned revision's policy (cancellation wins); `attempt.finished` and the run's event close it.
   */
  private async finish(
    tx: SqlExecutor,
    held: Held,
    status: Extract<AttemptStatus, 'failed' | 'cancelled' | 'timed_out' | 'succeeded'>,
    set: AttemptSet,
    leaseState: Exclude<LeaseState, 'active'>,
    before: EventInput[],
    detail: Record<string, string | number | null>,
  ): Promise<ActivationResult> {
    const { lease, run, attempt, known, now } = held;
    const knownRun = known && { row: known.run, now };
    // What the redaction held back ends the output: as written if the worker ended it, else hidden.
    await this.logs.flushHeld(tx, run, attempt.id, leaseState === 'completed' ? 'end' : 'cut');
    const ended = await endLease(tx, lease, leaseState, known && now);
    // callback_seq counts the acknowledgements applied (ADR 0010): a worker's ending ('completed')
    // is one, the deadline sweeper's ('expired') is not, as the lease sweeper's `lost` is not.
    const moved = await this.moveAttempt(tx, held, status, set, leaseState === 'completed');
    const revision = await readRevision(tx, run.taskId, run.revision);
    const next = decideRunAfterAttempt({
      end: status,
      cancelRequested: run.cancelRequested,
      attemptNo: attempt.attemptNo,
      retry: retrySchedule(revision?.spec.retry ?? null),
    });
    const events: EventInput[] = [
      ...before,
      { type: 'attempt.finished', attemptId: attempt.id, detail: { status, ...detail } },
    ];
    const runRow =
      next.kind === 'retry'
        ? await mustMove(
            tx,
            run,
            'retry_wait',
            [
              ...events,
              {
                type: 'run.retry_scheduled',
                detail: { nextAttemptNo: attempt.attemptNo + 1, backoffMs: next.backoffMs },
              },
            ],
            { retryAfterMs: next.backoffMs },
            knownRun,
          )
        : await mustMove(
            tx,
            run,
            next.runStatus,
            [...events, { type: 'run.finished', detail: { status: next.runStatus } }],
            {},
            knownRun,
          );
    return answer('applied', ended, toRun(runRow), moved);
  }

  private async moveAttempt(
    tx: SqlExecutor,
    { attempt, known, now }: Held,
    to: AttemptStatus,
    set: AttemptSet,
    acknowledged = true,
  ): Promise<Attempt> {
    const row = await transitionAttempt<ActivationRow>(
      tx,
      attempt,
      to,
      acknowledged ? { ...set, callback: true } : set,
      ACTIVATION_COLUMNS,
      known && { row: known.attempt, now },
    );
    return toActivation(row);
  }

  /** R-RUN-2: a step after the control plane ended the attempt; recorded once per (attempt, step). */
  private async late(tx: SqlExecutor, run: RunRecord, attempt: Attempt, step: string): Promise<void> {
    const seen = await tx.many<{ detail: string | null }>(
      `SELECT detail FROM run_events WHERE run_id = :runId AND attempt_id = :attemptId AND type = :type`,
      { runId: run.id, attemptId: attempt.id, type: LATE },
    );
    if (seen.some((e) => e.detail !== null && (JSON.parse(e.detail) as { step?: string }).step === step))
      return;
    await appendRunEvent(tx, run.id, {
      type: LATE,
      attemptId: attempt.id,
      detail: { step, status: attempt.status },
    });
  }

  // Read-only, scoped to the session's own live leases (the heartbeat answer carries it).
  async cancelIntents(workerId: string, sessionId: string, limit: number): Promise<string[]> {
    const rows = await this.db.many<{ attempt_id: string }>(cancelIntentsSql(':workerId', ':sessionId'), {
      workerId,
      sessionId,
      yes: true,
      cancelLimit: limit,
    });
    return rows.map((r) => r.attempt_id);
  }

  // Fixed work: one page of attempts past deadline + grace, each in its own transaction that takes
  // the lease with SKIP LOCKED and re-checks, so N replicas never end one attempt twice.
  async sweepDeadlines(pageSize: number, graceMs: number): Promise<DeadlineSweepResult> {
    const result = { timedOut: 0, retried: 0, cancelled: 0 };
    const due = await this.db.many<{ id: string }>(
      `SELECT id FROM attempts WHERE status IN ('starting', 'running') AND deadline_at <= {now + :back}
       ORDER BY deadline_at LIMIT :page`,
      { back: -graceMs, page: pageSize },
    );
    for (const { id } of due) {
      const outcome = await this.db.transaction((tx) => this.timeOut(tx, id, graceMs));
      if (outcome) result[outcome]++;
    }
    return result;
  }

  private async timeOut(
    tx: SqlTransaction,
    attemptId: string,
    graceMs: number,
  ): Promise<keyof DeadlineSweepResult | null> {
    const leaseRow = await tx.one<LeaseRow>(
      `SELECT ${LEASE_COLUMNS} FROM run_leases WHERE attempt_id = :attemptId AND state = 'active' {skipLocked}`,
      { attemptId },
    );
    if (!leaseRow) return null; // ended meanwhile, or another replica has it
    const lease = toLease(leaseRow);
    const run = await lockRun(tx, lease.runId);
    const attempt = await this.attempt(tx, attemptId);
    const now = await readNow(tx);
    if (!deadlinePassed(attempt, now, graceMs)) return null;
    const status = completionStatus('timed_out', run.cancelRequested);
    const ended = await this.finish(
      tx,
      { lease, run, attempt, now },
      status,
      { errorCode: 'deadline_exceeded' },
      'expired',
      [{ type: 'attempt.deadline_exceeded', attemptId, detail: { graceMs } }],
      {},
    );
    if (ended.snapshot.runStatus === 'retry_wait') return 'retried';
    return status === 'cancelled' ? 'cancelled' : 'timedOut';
  }
}

async function mustMove(
  tx: SqlExecutor,
  run: RunRecord,
  to: RunRecord['status'],
  events: EventInput[],
  set: Parameters<typeof transitionRun>[4] = {},
  known?: Known<RunRow>,
): Promise<RunRow> {
  const row = await transitionRun(tx, run, to, events, set, known);
  if (!row) throw new IllegalStateError(`run ${run.id} moved under its row lock`);
  return row;
}

/** The answer's projection (R-ACT-3); the token digest stays here. */
function answer(
  status: AcknowledgementStatus,
  lease: LeaseRecord,
  run: RunRecord,
  attempt: Attempt,
): ActivationResult {
  const snapshot: AttemptSnapshot = {
    runId: run.id,
    attemptId: attempt.id,
    runStatus: run.status,
    attemptStatus: attempt.status,
    leaseVersion: lease.version,
    leaseGeneration: lease.leaseGeneration,
    callbackSequence: attempt.callbackSequence,
    deadlineAt: attempt.deadlineAt,
    startedAt: attempt.startedAt,
    finishedAt: attempt.finishedAt,
    executorHandle: attempt.executorHandle,
    errorCode: attempt.errorCode,
  };
  return { status, snapshot, cancelRequested: run.cancelRequested };
}
