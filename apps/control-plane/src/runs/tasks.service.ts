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
    const q = readObject(query ?? {}, 'query', ['after', 'limit']);
    const after = q.after === undefined ? undefined : parseResourceId(q.after, 'after');
    const limit = readLimit(q.limit);
    const tasks = await this.tasks.list({ after, limit });
    return {
      items: tasks.map(toTaskView),
      nextAfter: tasks.length === limit ? tasks[tasks.length - 1]!.id : null,
    };
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

function toTaskView(t: TaskRecord) {
  return {
    id: t.id,
    name: t.name,
    revision: t.revision,
    digest: t.digest,
    spec: t.spec,
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
