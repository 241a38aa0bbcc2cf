import { BoolField } from '../../http/validation/dto-fields';

/** `PATCH /api/v1/tasks/{taskId}`: a task's state (issue 31 item 3), never a new revision. */
export class TaskStateDto {
  @BoolField({ presence: 'optional', description: 'false: cron skips the task, which keeps its schedule' })
  enabled?: boolean;

  @BoolField({ presence: 'optional', description: 'listed first' })
  pinned?: boolean;
}
