import { TASK_LIMITS } from '@ql/domain';
import { IntField } from '../../http/validation/dto-fields';

/** `POST /api/v1/tasks/{taskId}/runs` (R-RUN-3); no body reads as `{}`. */
export class TriggerRunDto {
  @IntField(0, TASK_LIMITS.maxPriority, { presence: 'optional', description: "default: the task's priority" })
  priority?: number;
}
