import {
  AttemptRecord,
  AttemptStatus,
  Capabilities,
  IllegalStateError,
  PlacementSpec,
  RunEvent,
  RunEventType,
  RunRecord,
  RunStatus,
  assertAttemptTransition,
  assertRunTransition,
} from '@ql/domain';
import { SqlExecutor, SqlParams, isTrue, toInt, toMs, toMsOrNull } from './sql-executor';

/** Shared by the run and lease repositories: rows, mappers, and the two compare-and-set transitions. */
export interface RunRow {
  id: string;
  task_id: string;
  revision: number;
  spec_digest: string;
  placement_json: string;
  status: RunStatus;
  version: number | string;
  event_seq: number | string;
  priority: number;
  queue_order: number | string;
  trigger_kind: 'manual' | 'cron';
  scheduled_at: number | Date | null;
  attempt_count: number;
  current_attempt_id: string | null;
  cancel_requested: number | boolean;
  next_attempt_at: number | Date | null;
  log_bytes: number | string;
  log_truncated: number | boolean;
  created_at: number | Date;
  updated_at: number | Date;
  finished_at: number | Date | null;
}

export const RUN_COLUMNS = `id, task_id, revision, spec_digest, placement_json, status, version, event_seq, priority,
  queue_order, trigger_kind, scheduled_at, attempt_count, current_attempt_id, cancel_requested, next_attempt_at,
  log_bytes, log_truncated, created_at, updated_at, finished_at`;

export interface AttemptRow {
  id: string;
  run_id: string;
  attempt_no: number;
  status: AttemptStatus;
  version: number | string;
  worker_id: string | null;
  session_id: string | null;
  exit_code: number | null;
  lease_generation: number;
  created_at: number | Date;
  updated_at: number | Date;
  finished_at: number | Date | null;
}

export const ATTEMPT_COLUMNS = `id, run_id, attempt_no, status, version, worker_id, session_id, exit_code,
  lease_generation, created_at, updated_at, finished_at`;

export function toRun(row: RunRow): RunRecord {
  return {
    id: row.id,
    taskId: row.task_id,
    revision: toInt(row.revision),
    specDigest: row.spec_digest,
    status: row.status,
    version: toInt(row.version),
    priority: toInt(row.priority),
    trigger: row.trigger_kind,
    scheduledAt: toMsOrNull(row.scheduled_at),
    attemptCount: toInt(row.attempt_count),
    currentAttemptId: row.current_attempt_id,
    cancelRequested: isTrue(row.cancel_requested),
    availableAt: toMsOrNull(row.next_attempt_at) ?? toInt(row.queue_order),
    placement: storedPlacements.get(row.placement_json),
    logBytes: toInt(row.log_bytes),
    logTruncated: isTrue(row.log_truncated),
    createdAt: toMs(row.created_at),
    updatedAt: toMs(row.updated_at),
    finishedAt: toMsOrNull(row.finished_at),
  };
}

export function toAttempt(row: AttemptRow): AttemptRecord {
  return {
    id: row.id,
    runId: row.run_id,
    attemptNo: toInt(row.attempt_no),
    status: row.status,
    version: toInt(row.version),
    workerId: row.worker_id,
    sessionId: row.session_id,
    exitCode: row.exit_code === null ? null : toInt(row.exit_code),
    leaseGeneration: toInt(row.lease_generation),
    createdAt: toMs(row.created_at),
    updatedAt: toMs(row.updated_at),
    finishedAt: toMsOrNull(row.finished_at),
  };
}

export interface EventInput {
  readonly type: RunEventType;
  readonly attemptId?: string | null;
  readonly detail?: Record<string, string | number | boolean | null>;
}

/** Columns a run transition may also set; fixed fragments, so the SQL text stays from a small set. */
const RUN_SETS = {
  currentAttemptId: 'current_attempt_id = :currentAttemptId',
  attemptCount: 'attempt_count = :attemptCount',
  cancelRequested: 'cancel_requested = :cancelRequested',
  retryAfterMs: 'next_attempt_at = {now + :retryAfterMs}',
  requeue: 'queue_order = {nowMs}, next_attempt_at = NULL',
} as const;
export type RunSet = Partial<Record<keyof typeof RUN_SETS, string | number | boolean | null>>;

const TERMINAL_RUN = new Set<RunStatus>(['succeeded', 'failed', 'cancelled', 'timed_out', 'lost']);

/**
 * R-RUN-2: one compare-and-set on (run id, expected version) that moves the status (or only sets
 * fields, when `to` is the current status) and appends `events` with the next per-run sequence
 * numbers, in the caller's transaction. Throws IllegalStateError on a transition the table forbids,
 * and `null` is returned when the CAS missed (the caller decides what that means).
 */
export async function transitionRun(
  tx: SqlExecutor,
  run: { readonly id: string; readonly version: number; readonly status: RunStatus },
  to: RunStatus,
  events: readonly EventInput[],
  set: RunSet = {},
  known?: Known<RunRow>,
): Promise<RunRow | null> {
  return moveRun<RunRow>(tx, run, to, events, set, RUN_COLUMNS, known);
}

/**
 * The row as it stood when this transaction read it, and that read's time: on SQLite, under BEGIN
 * IMMEDIATE (the only writer), what a compare-and-set writes is then known, so it runs without
 * RETURNING at that time and the new row is computed from the old one (ADR 0025). PostgreSQL never
 * passes it: its statements read their own clock.
 */
export interface Known<T> {
  readonly row: T;
  readonly now: number;
}

/** `transitionRun` for callers that need only to know it happened. */
export async function moveRunQuietly(
  tx: SqlExecutor,
  run: { readonly id: string; readonly version: number; readonly status: RunStatus },
  to: RunStatus,
  events: readonly EventInput[],
  set: RunSet = {},
  known?: Known<Pick<RunRow, 'event_seq'>>,
): Promise<boolean> {
  return (await moveRun<Pick<RunRow, 'event_seq'>>(tx, run, to, events, set, 'event_seq', known)) !== null;
}

async function moveRun<T extends { event_seq: number | string }>(
  tx: SqlExecutor,
  run: { readonly id: string; readonly version: number; readonly status: RunStatus },
  to: RunStatus,
  events: readonly EventInput[],
  set: RunSet,
  returning: string,
  known?: Known<T>,
): Promise<T | null> {
  if (to !== run.status) assertRunTransition(run.status, to);
  const keys = (Object.keys(set) as (keyof typeof RUN_SETS)[]).sort();
  const fragments: string[] = keys.map((k) => RUN_SETS[k]);
  const finishes = TERMINAL_RUN.has(to) && to !== run.status;
  if (finishes) fragments.push('finished_at = {now}');
  const params: Record<string, string | number | boolean | null> = {
    id: run.id,
    version: run.version,
    to,
    n: events.length,
  };
  for (const k of keys) if (k !== 'requeue') params[k] = set[k] ?? null;
  const sql = `UPDATE runs SET status = :to, version = version + 1, event_seq = event_seq + :n, updated_at = {now}
       ${fragments.map((f) => `, ${f}`).join('')}
     WHERE id = :id AND version = :version`;
  let row: T | undefined;
  if (known) {
    if ((await tx.run(sql, { ...params, now: known.now })) !== 1) return null;
    row = movedRun(known, to, events.length, set, finishes);
  } else {
    row = await tx.one<T>(`${sql} RETURNING ${returning}`, params);
    if (!row) return null;
  }
  await appendEvents(tx, run.id, toInt(row.event_seq) - events.length + 1, events, known?.now);
  return row;
}

/** What `moveRun`'s UPDATE wrote, from the row it started from: keep in step with RUN_SETS. */
function movedRun<T extends { event_seq: number | string }>(
  { row, now }: Known<T>,
  to: RunStatus,
  n: number,
  set: RunSet,
  finishes: boolean,
): T {
  const next: Record<string, unknown> = { ...row, event_seq: toInt(row.event_seq) + n };
  if (!('status' in row)) return next as T; // only the sequence was read back
  const old = row as unknown as RunRow;
  Object.assign(next, { status: to, version: toInt(old.version) + 1, updated_at: now });
  if ('currentAttemptId' in set) next.current_attempt_id = set.currentAttemptId;
  if ('attemptCount' in set) next.attempt_count = set.attemptCount;
  if ('cancelRequested' in set) next.cancel_requested = set.cancelRequested;
  if ('retryAfterMs' in set) next.next_attempt_at = plus(now, set.retryAfterMs);
  if ('requeue' in set) Object.assign(next, { queue_order: now, next_attempt_at: null });
  if (finishes) next.finished_at = now;
  return next as T;
}

/** Columns an attempt transition may also set (activation, completion, deadline); fixed fragments. */
const ATTEMPT_SETS = {
  startedAt: 'started_at = {now}',
  deadlineMs: 'deadline_at = {now + :deadlineMs}',
  executorHandle: 'executor_handle = :executorHandle',
  errorCode: 'error_code = :errorCode',
  exitCode: 'exit_code = :exitCode',
  errorSummary: 'error_summary = :errorSummary',
  ackStarting: 'ack_starting = :ackStarting',
  ackRunning: 'ack_running = :ackRunning',
  ackFinal: 'ack_final = :ackFinal',
  callback: 'callback_seq = callback_seq + 1',
} as const;
export type AttemptSet = Partial<Record<keyof typeof ATTEMPT_SETS, string | number | boolean | null>>;

/** R-RUN-2: one compare-and-set on (attempt id, expected version), also setting `set`'s columns. */
export async function transitionAttempt<T = AttemptRow>(
  tx: SqlExecutor,
  attempt: { readonly id: string; readonly version: number; readonly status: AttemptStatus },
  to: AttemptStatus,
  set: AttemptSet = {},
  returning: string = ATTEMPT_COLUMNS,
  known?: Known<T>,
): Promise<T> {
  assertAttemptTransition(attempt.status, to);
  const terminal = to !== 'starting' && to !== 'running';
  const keys = (Object.keys(set) as (keyof typeof ATTEMPT_SETS)[]).sort();
  const params: Record<string, string | number | boolean | null> = {
    id: attempt.id,
    version: attempt.version,
    to,
  };
  for (const k of keys) if (k !== 'startedAt' && k !== 'callback') params[k] = set[k] ?? null;
  const sql = `UPDATE attempts SET status = :to, version = version + 1, updated_at = {now}
       ${terminal ? ', finished_at = {now}' : ''}${keys.map((k) => `, ${ATTEMPT_SETS[k]}`).join('')}
     WHERE id = :id AND version = :version`;
  const row = known
    ? (await tx.run(sql, { ...params, now: known.now })) === 1
      ? movedAttempt(known, to, set, terminal)
      : undefined
    : await tx.one<T>(`${sql} RETURNING ${returning}`, params);
  // Attempts change only under their run's row lock, so a miss is a bug, not a race.
  if (!row) throw new IllegalStateError(`attempt ${attempt.id} moved under its run's lock`);
  return row;
}

/** The attempt columns ATTEMPT_SETS writes, by key; `startedAt`, `deadlineMs` and `callback` are computed. */
const ATTEMPT_SET_COLUMNS = {
  executorHandle: 'executor_handle',
  errorCode: 'error_code',
  exitCode: 'exit_code',
  errorSummary: 'error_summary',
  ackStarting: 'ack_starting',
  ackRunning: 'ack_running',
  ackFinal: 'ack_final',
} as const;

/** `{now + :ms}` as SQL computes it: NULL stays NULL. */
function plus(now: number, ms: string | number | boolean | null | undefined): number | null {
  return ms === null || ms === undefined ? null : now + Number(ms);
}

/** What `transitionAttempt`'s UPDATE wrote, from the row it started from: keep in step with ATTEMPT_SETS. */
function movedAttempt<T>({ row, now }: Known<T>, to: AttemptStatus, set: AttemptSet, terminal: boolean): T {
  const old = row as unknown as AttemptRow & { callback_seq?: number | string };
  const next: Record<string, unknown> = { ...old, status: to, version: toInt(old.version) + 1, updated_at: now };
  if (terminal) next.finished_at = now;
  for (const key of Object.keys(set) as (keyof AttemptSet)[]) {
    if (key === 'startedAt') next.started_at = now;
    else if (key === 'deadlineMs') next.deadline_at = plus(now, set.deadlineMs);
    else if (key === 'callback') next.callback_seq = toInt(old.callback_seq) + 1;
    else next[ATTEMPT_SET_COLUMNS[key]] = set[key] ?? null;
  }
  return next as T;
}

/** An event that records without a transition (a late callback): the run's sequence moves, nothing else. */
export async function appendRunEvent(tx: SqlExecutor, runId: string, event: EventInput): Promise<void> {
  const row = await tx.one<{ event_seq: number | string }>(
    'UPDATE runs SET event_seq = event_seq + 1 WHERE id = :id RETURNING event_seq',
    { id: runId },
  );
  if (!row) throw new IllegalStateError(`run ${runId} is missing`);
  await appendEvents(tx, runId, toInt(row.event_seq), [event]);
}

export async function appendEvents(
  tx: SqlExecutor,
  runId: string,
  firstSeq: number,
  events: readonly EventInput[],
  now?: number,
): Promise<void> {
  if (events.length === 0) return;
  const params: Record<string, string | number | null> = { runId };
  if (now !== undefined) params.now = now;
  const values = events.map((e, i) => {
    params[`s${i}`] = firstSeq + i;
    params[`t${i}`] = e.type;
    params[`a${i}`] = e.attemptId ?? null;
    params[`d${i}`] = e.detail ? JSON.stringify(e.detail) : null;
    return `(:runId, :s${i}, :t${i}, :a${i}, {now}, :d${i})`;
  });
  await tx.run(
    `INSERT INTO run_events (run_id, seq, type, attempt_id, at, detail) VALUES ${values.join(', ')}`,
    params as SqlParams,
  );
}

export interface EventRow {
  run_id: string;
  seq: number | string;
  type: RunEventType;
  attempt_id: string | null;
  at: number | Date;
  detail: string | null;
}

export function toEvent(row: EventRow): RunEvent {
  return {
    runId: row.run_id,
    seq: toInt(row.seq),
    type: row.type,
    attemptId: row.attempt_id,
    at: toMs(row.at),
    detail: row.detail ? (JSON.parse(row.detail) as RunEvent['detail']) : null,
  };
}

/** Parsed stored JSON (written canonical by us), cached by text: many runs share one placement. */
class JsonCache<T> {
  private readonly map = new Map<string, T>();
  constructor(private readonly max: number) {}
  get(json: string): T {
    let value = this.map.get(json);
    if (value === undefined) {
      value = JSON.parse(json) as T;
      if (this.map.size >= this.max) this.map.delete(this.map.keys().next().value!);
      this.map.set(json, value);
    }
    return value;
  }
}
export const storedPlacements = new JsonCache<PlacementSpec>(512);

/** Capabilities are immutable per digest: each replica parses a document once (keyed by its digest). */
const capabilitiesByDigest = new Map<string, Capabilities>();
export function cachedCapabilities(digest: string): Capabilities | undefined {
  return capabilitiesByDigest.get(digest);
}
export function rememberCapabilities(digest: string, json: string): Capabilities {
  let parsed = capabilitiesByDigest.get(digest);
  if (!parsed) {
    parsed = JSON.parse(json) as Capabilities;
    if (capabilitiesByDigest.size >= 1024) capabilitiesByDigest.clear();
    capabilitiesByDigest.set(digest, parsed);
  }
  return parsed;
}

/**
 * The session's live leases whose run has a cancel request (R-RUN-5), in attempt order, at most
 * `:cancelLimit`: read alone by `cancelIntents` and inside the heartbeat statement (ADR 0018).
 */
export function cancelIntentsSql(workerId: string, sessionId: string): string {
  return `SELECT l.attempt_id FROM run_leases l JOIN runs r ON r.id = l.run_id
    WHERE l.worker_id = ${workerId} AND l.session_id = ${sessionId} AND l.state = 'active'
      AND r.cancel_requested = :yes
    ORDER BY l.attempt_id LIMIT :cancelLimit`;
}
