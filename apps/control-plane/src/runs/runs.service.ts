import { Inject, Injectable } from '@nestjs/common';
import {
  ACTIVATION_REPOSITORY,
  ActivationRepository,
  ApiKeyRecord,
  AttemptDetail,
  ID_GENERATOR,
  IdGenerator,
  LogEntry,
  LogPage,
  NotFoundError,
  RUN_REPOSITORY,
  RUN_STATUSES,
  RunEvent,
  RunRecord,
  RunRepository,
  TASK_LIMITS,
  UNKNOWN_LOG_STREAM,
  ValidationError,
  canonicalJson,
  displayAnsiLogText,
  displayLogText,
  readEnum,
  readInt,
  parseWorkerId,
  readObject,
  sha256Hex,
  TASK_REPOSITORY,
  TaskRepository,
} from '@ql/domain';
import { readLimit, readQueryInt } from '../admin/query-params';
import { PlacementService } from '../placement/placement.service';
import type { TriggerRunDto } from './dto/trigger-run.dto';
import { RunLogWaiters } from './run-log-waiters';
import { IDEMPOTENCY_KEY_PATTERN, parseResourceId } from './resource-ids';

const DETAIL_EVENTS = 200;
/** Highest `?after=` of a log read: a run keeps fewer entries than this under its largest cap. */
export const LOG_POSITION_MAX = 2 ** 31 - 1;
/** Longest `?wait=` of a log tail, in seconds: under common proxy idle timeouts (ADR 0013). */
export const LOG_WAIT_MAX_SECONDS = 20;
/** A waiting tail re-reads the store this often: a chunk written by another replica is seen by it. */
export const LOG_TAIL_POLL_MS = 500;

/** Runs: trigger, list, detail with attempts, events and the placement explanation, cancel (R-RUN-2..5, R-PLC-3). */
@Injectable()
export class RunsService {
  constructor(
    @Inject(RUN_REPOSITORY) private readonly runs: RunRepository,
    @Inject(TASK_REPOSITORY) private readonly tasks: Pick<TaskRepository, 'names'>,
    @Inject(ID_GENERATOR) private readonly ids: IdGenerator,
    private readonly placement: PlacementService,
    @Inject(ACTIVATION_REPOSITORY) private readonly activation: ActivationRepository,
    private readonly logWaiters: RunLogWaiters,
  ) {}

  /** Manual trigger; the same Idempotency-Key and body return the first run (`created: false`). */
  async trigger(actor: ApiKeyRecord, taskId: string, body: TriggerRunDto, idempotencyKey: unknown) {
    const id = parseResourceId(taskId, 'taskId');
    const b = readObject(body ?? {}, '', ['priority']);
    const priority =
      b.priority === undefined ? undefined : readInt(b.priority, 'priority', 0, TASK_LIMITS.maxPriority);
    if (
      idempotencyKey !== undefined &&
      (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(idempotencyKey))
    )
      throw new ValidationError('Idempotency-Key', 'invalid_format');
    const runId = this.ids.uuidV7();
    const result = await this.runs.trigger({
      runId,
      taskId: id,
      trigger: 'manual',
      priority,
      idempotency:
        idempotencyKey === undefined
          ? undefined
          : {
              key: idempotencyKey as string,
              digest: sha256Hex(canonicalJson({ taskId: id, priority: priority ?? null })),
            },
      audit: { actor: actor.id, action: 'run.trigger', target: `run:${runId}`, detail: { taskId: id } },
    });
    if (!result) throw new Error('manual trigger returned no run');
    return { created: result.created, run: toRunView(result.run) };
  }

  async list(query: unknown) {
    const q = readObject(query ?? {}, 'query', ['status', 'taskId', 'workerId', 'before', 'limit']);
    const limit = readLimit(q.limit);
    const runs = await this.runs.list({
      status: q.status === undefined ? undefined : readEnum(q.status, 'status', RUN_STATUSES),
      taskId: q.taskId === undefined ? undefined : parseResourceId(q.taskId, 'taskId'),
      workerId: q.workerId === undefined ? undefined : parseWorkerId(q.workerId, 'workerId'),
      before: q.before === undefined ? undefined : parseResourceId(q.before, 'before'),
      limit,
    });
    // The page's task names in one read, however many tasks there are (issue 31 item 3).
    const names = await this.tasks.names([...new Set(runs.map((r) => r.taskId))]);
    return {
      items: runs.map((r) => ({ ...toRunView(r), taskName: names.get(r.taskId) ?? null })),
      nextBefore: runs.length === limit ? runs[runs.length - 1]!.id : null,
    };
  }

  async get(id: string) {
    const runId = parseResourceId(id, 'runId');
    const run = await this.runs.find(runId);
    if (!run) throw new NotFoundError('run');
    const [attempts, events, envVars] = await Promise.all([
      this.runs.attempts(runId),
      this.runs.events(runId, { afterSeq: 0, limit: DETAIL_EVENTS }),
      this.runs.envVars(runId),
    ]);
    const names = await this.tasks.names([run.taskId]);
    return {
      ...toRunView(run),
      taskName: names.get(run.taskId) ?? null,
      placement: run.placement,
      log: { bytes: run.logBytes, truncated: run.logTruncated },
      pending: run.status === 'queued' ? await this.placement.explain(run.placement) : null,
      attempts: attempts.map(toAttemptView),
      events: events.map(toEventView),
      envVars,
    };
  }

  /**
   * One page of a run's output after a position (R-RUN-6). With `wait=` seconds, an empty page of a
   * live run is held until output or the run's end is stored, the wait is over, the client has gone
   * (`signal`) or the plane stops; the answer is then the page as it is (ADR 0013).
   */
  async logs(id: string, query: unknown, signal: AbortSignal = new AbortController().signal) {
    const runId = parseResourceId(id, 'runId');
    const q = readObject(query ?? {}, 'query', ['after', 'limit', 'wait', 'view']);
    const view = readLogView(q.view);
    const after = q.after === undefined ? 0 : readQueryInt(q.after, 'after', 0, LOG_POSITION_MAX);
    const limit = readLimit(q.limit);
    const waitMs = q.wait === undefined ? 0 : readQueryInt(q.wait, 'wait', 0, LOG_WAIT_MAX_SECONDS) * 1000;
    const until = Date.now() + waitMs;
    const read = async () => {
      const found = await this.activation.readLogs(runId, { after, limit });
      if (!found) throw new NotFoundError('run');
      return found;
    };
    const idle = (p: LogPage) => p.entries.length === 0 && !p.runEnded && Date.now() < until;
    let page = await read();
    if (idle(page))
      page = await this.logWaiters.hold(async () => {
        let current = page;
        while (idle(current)) {
          const wait = Math.min(LOG_TAIL_POLL_MS, until - Date.now());
          if (!(await this.logWaiters.wait(runId, wait, signal))) break;
          current = await read();
        }
        return current;
      });
    return {
      items: page.entries.map((e) => toLogView(e, view)),
      nextAfter: page.entries.at(-1)?.position ?? after,
      runEnded: page.runEnded,
      truncated: page.truncated,
    };
  }

  async cancel(actor: ApiKeyRecord, id: string) {
    const runId = parseResourceId(id, 'runId');
    const run = await this.runs.requestCancel(runId, {
      actor: actor.id,
      action: 'run.cancel',
      target: `run:${runId}`,
    });
    this.logWaiters.notify(runId);
    return toRunView(run);
  }
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function toRunView(r: RunRecord) {
  return {
    id: r.id,
    taskId: r.taskId,
    revision: r.revision,
    specDigest: r.specDigest,
    status: r.status,
    version: r.version,
    priority: r.priority,
    trigger: r.trigger,
    scheduledAt: iso(r.scheduledAt),
    attemptCount: r.attemptCount,
    currentAttemptId: r.currentAttemptId,
    cancelRequested: r.cancelRequested,
    createdAt: iso(r.createdAt),
    updatedAt: iso(r.updatedAt),
    finishedAt: iso(r.finishedAt),
  };
}

function toAttemptView(a: AttemptDetail) {
  return {
    id: a.id,
    attemptNo: a.attemptNo,
    status: a.status,
    version: a.version,
    workerId: a.workerId,
    sessionId: a.sessionId,
    exitCode: a.exitCode,
    errorCode: a.errorCode,
    errorSummary: a.errorSummary,
    leaseGeneration: a.leaseGeneration,
    createdAt: iso(a.createdAt),
    updatedAt: iso(a.updatedAt),
    finishedAt: iso(a.finishedAt),
  };
}

function toEventView(e: RunEvent) {
  return { seq: e.seq, type: e.type, attemptId: e.attemptId, at: iso(e.at), detail: e.detail };
}

/** `?view=`: `text` (default) neutralizes every escape; `ansi` keeps colour sequences (ADR 0052). */
function readLogView(value: unknown): 'text' | 'ansi' {
  if (value === undefined || value === 'text' || value === 'ansi') return value ?? 'text';
  throw new ValidationError('view', 'invalid_view', 'view: must be text or ansi');
}

/** The one place stored output becomes a view: its text neutralized, its stream named (ADR 0032). */
function toLogView(e: LogEntry, view: 'text' | 'ansi') {
  return {
    position: e.position,
    attemptId: e.attemptId,
    seq: e.seq,
    kind: e.kind,
    stream: e.stream ?? UNKNOWN_LOG_STREAM,
    text: view === 'ansi' ? displayAnsiLogText(e.raw) : displayLogText(e.raw),
    at: iso(e.at),
  };
}
