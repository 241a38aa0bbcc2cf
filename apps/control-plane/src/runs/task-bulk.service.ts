import { Injectable } from '@nestjs/common';
import { ApiKeyRecord, DomainError, ValidationError, canonicalJson, sha256Hex } from '@ql/domain';
import { renderAdminError } from '../http/admin-errors';
import { TASK_BULK_ACTIONS, TASK_BULK_MAX, TaskBulkAction } from './dto/task-bulk.dto';
import { IDEMPOTENCY_KEY_PATTERN } from './resource-ids';
import { RunsService } from './runs.service';
import { TasksService } from './tasks.service';

export interface TaskBulkResult {
  readonly taskId: string;
  readonly ok: boolean;
  /** `run`: the run made (or, for the same Idempotency-Key again, the first one). */
  readonly runId?: string;
  /** A refusal of this task alone: its stable code (or reason) and message; the others went on. */
  readonly code?: string;
  readonly message?: string;
}

/**
 * One action on many tasks (issue 31 item 3): each task on its own, in the order given, as the single
 * routes do it (their rules, audit rows and refusals); a refusal of one (a deleted task) is its
 * result and the rest go on. A `run` with an Idempotency-Key makes each task's run with a key derived
 * from it, so the same request again returns the same runs.
 */
@Injectable()
export class TaskBulkService {
  constructor(
    private readonly tasks: TasksService,
    private readonly runs: RunsService,
  ) {}

  async apply(
    actor: ApiKeyRecord,
    body: { action: TaskBulkAction; taskIds: string[] },
    idempotencyKey: unknown,
  ) {
    if (!TASK_BULK_ACTIONS.includes(body.action)) throw new ValidationError('action', 'invalid');
    if (body.taskIds.length === 0 || body.taskIds.length > TASK_BULK_MAX)
      throw new ValidationError('taskIds', 'too_many_items', `taskIds: 1 … ${TASK_BULK_MAX} ids`);
    if (new Set(body.taskIds).size !== body.taskIds.length)
      throw new ValidationError('taskIds', 'duplicate_item');
    // Judged once, as the single trigger route judges it, before any task is touched.
    if (
      idempotencyKey !== undefined &&
      (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(idempotencyKey))
    )
      throw new ValidationError('Idempotency-Key', 'invalid_format');
    const results: TaskBulkResult[] = [];
    for (const taskId of body.taskIds) {
      try {
        results.push({ taskId, ok: true, ...(await this.one(actor, body.action, taskId, idempotencyKey)) });
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        const problem = renderAdminError(error);
        results.push({
          taskId,
          ok: false,
          code: problem.reason ?? problem.code,
          message: problem.detail,
        });
      }
    }
    return { action: body.action, results };
  }

  private async one(
    actor: ApiKeyRecord,
    action: TaskBulkAction,
    taskId: string,
    idempotencyKey: unknown,
  ): Promise<{ runId?: string }> {
    switch (action) {
      case 'run': {
        const key =
          typeof idempotencyKey === 'string'
            ? `bulk:${sha256Hex(canonicalJson({ key: idempotencyKey, taskId })).slice(0, 40)}`
            : undefined;
        const { run } = await this.runs.trigger(actor, taskId, {}, key);
        return { runId: run.id };
      }
      case 'enable':
      case 'disable':
        await this.tasks.setState(actor, taskId, { enabled: action === 'enable' });
        return {};
      case 'pin':
      case 'unpin':
        await this.tasks.setState(actor, taskId, { pinned: action === 'pin' });
        return {};
      case 'delete':
        await this.tasks.delete(actor, taskId);
        return {};
    }
  }
}
