import { Inject, Injectable } from '@nestjs/common';
import {
  ApiKeyRecord,
  ID_GENERATOR,
  IdGenerator,
  NotFoundError,
  TASK_REPOSITORY,
  TaskRecord,
  TaskRepository,
  TaskRevisionRecord,
  parseTaskSpec,
  readObject,
  CLOCK,
  Clock,
  RUN_STATUSES,
  TASK_LIMITS,
  ValidationError,
  nextFireTime,
  parseCron,
  readBoolean,
  readEnum,
  readString,
} from '@ql/domain';
import { readLimit, readQueryInt } from '../admin/query-params';
import { BundleWorkdirs } from '../bundles/bundle-workdirs';
import type { TaskSpecDto } from './dto/task-spec.dto';
import { parseResourceId } from './resource-ids';

/** Revisions are 32-bit integers. */
export const REVISION_MAX = 2 ** 31 - 1;

/** Tasks and their revisions (R-RUN-1, R-ADM-1); every mutation is audited in its own transaction. */
@Injectable()
export class TasksService {
  constructor(
    @Inject(TASK_REPOSITORY) private readonly tasks: TaskRepository,
    @Inject(ID_GENERATOR) private readonly ids: IdGenerator,
    private readonly workdirs: BundleWorkdirs,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async create(actor: ApiKeyRecord, body: TaskSpecDto) {
    const spec = parseTaskSpec(body);
    await this.workdirs.check(spec.spec.bundle);
    const id = this.ids.uuidV7();
    const task = await this.tasks.create(id, spec, {
      actor: actor.id,
      action: 'task.create',
      target: `task:${id}`,
    });
    return toTaskView(task);
  }

  async update(actor: ApiKeyRecord, id: string, body: TaskSpecDto) {
    const taskId = parseResourceId(id, 'taskId');
    const spec = parseTaskSpec(body);
    await this.workdirs.check(spec.spec.bundle);
    const { task, changed } = await this.tasks.update(taskId, spec, {
      actor: actor.id,
      action: 'task.update',
      target: `task:${taskId}`,
    });
    return { ...toTaskView(task), changed };
  }

  async get(id: string) {
    const task = await this.tasks.find(parseResourceId(id, 'taskId'));
    if (!task) throw new NotFoundError('task');
    return toTaskView(task);
  }

  async list(query: unknown) {
    const q = readObject(query ?? {}, 'query', ['after', 'limit', 'q', 'enabled', 'lastStatus']);
    const after = q.after === undefined ? undefined : parseResourceId(q.after, 'after');
    const limit = readLimit(q.limit);
    const tasks = await this.tasks.list({
      after,
      limit,
      ...(q.q === undefined ? {} : { q: readString(q.q, 'q', { max: TASK_LIMITS.nameLength }) }),
      ...(q.enabled === undefined
        ? {}
        : { enabled: readEnum(q.enabled, 'enabled', ['true', 'false']) === 'true' }),
      ...(q.lastStatus === undefined
        ? {}
        : { lastStatus: readEnum(q.lastStatus, 'lastStatus', RUN_STATUSES) }),
    });
    const now = this.clock.now();
    return {
      items: tasks.map((t) => ({
        ...toTaskView(t),
        lastRun: t.lastRun,
        nextFireAt: nextFireOf(t, now),
      })),
      nextAfter: tasks.length === limit ? tasks[tasks.length - 1]!.id : null,
    };
  }

  /** Enable, disable, pin or unpin (issue 31 item 3): the task's state, never a new revision. */
  async setState(actor: ApiKeyRecord, id: string, body: { enabled?: boolean; pinned?: boolean }) {
    const taskId = parseResourceId(id, 'taskId');
    const state = readObject(body ?? {}, '', ['enabled', 'pinned']);
    if (state.enabled === undefined && state.pinned === undefined)
      throw new ValidationError('', 'empty', 'say enabled, pinned or both');
    const change = {
      ...(state.enabled === undefined ? {} : { enabled: readBoolean(state.enabled, 'enabled') }),
      ...(state.pinned === undefined ? {} : { pinned: readBoolean(state.pinned, 'pinned') }),
    };
    const task = await this.tasks.setState(taskId, change, {
      actor: actor.id,
      action: 'task.state',
      target: `task:${taskId}`,
      detail: change,
    });
    return toTaskView(task);
  }

  async delete(actor: ApiKeyRecord, id: string) {
    const taskId = parseResourceId(id, 'taskId');
    const task = await this.tasks.delete(taskId, {
      actor: actor.id,
      action: 'task.delete',
      target: `task:${taskId}`,
    });
    return { ...toTaskView(task), deleted: true };
  }

  async revisions(id: string, query: unknown) {
    const q = readObject(query ?? {}, 'query', ['before', 'limit']);
    const beforeRevision =
      q.before === undefined ? undefined : readQueryInt(q.before, 'before', 1, REVISION_MAX);
    const limit = readLimit(q.limit);
    const revisions = await this.tasks.listRevisions(parseResourceId(id, 'taskId'), {
      beforeRevision,
      limit,
    });
    const last = revisions[revisions.length - 1];
    return {
      items: revisions.map(toRevisionView),
      // Revisions count down to 1: a full page ending at 1 is the last one.
      nextBefore: revisions.length === limit && last!.revision > 1 ? last!.revision : null,
    };
  }
}

/** The next scheduled time of an enabled cron task (a disabled one's are skipped: null). */
function nextFireOf(t: TaskRecord, now: number): string | null {
  if (!t.enabled || !t.spec.cron) return null;
  const next = nextFireTime(parseCron(t.spec.cron, 'cron', t.spec.timezone), now);
  return next === null ? null : new Date(next).toISOString();
}

function toTaskView(t: TaskRecord) {
  return {
    id: t.id,
    name: t.name,
    revision: t.revision,
    digest: t.digest,
    spec: t.spec,
    enabled: t.enabled,
    pinned: t.pinned,
    createdAt: new Date(t.createdAt).toISOString(),
    updatedAt: new Date(t.updatedAt).toISOString(),
  };
}

function toRevisionView(r: TaskRevisionRecord) {
  return {
    taskId: r.taskId,
    revision: r.revision,
    digest: r.digest,
    spec: r.spec,
    createdAt: new Date(r.createdAt).toISOString(),
  };
}
