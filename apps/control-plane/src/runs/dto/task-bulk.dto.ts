import { ApiProperty } from '@nestjs/swagger';
import { UUID_V7_PATTERN } from '@ql/domain';
import { EnumField, TextListField } from '../../http/validation/dto-fields';

export const TASK_BULK_ACTIONS = ['run', 'enable', 'disable', 'pin', 'unpin', 'delete'] as const;
export type TaskBulkAction = (typeof TASK_BULK_ACTIONS)[number];
/** Tasks one bulk request may name: one page of the console's list and more. */
export const TASK_BULK_MAX = 200;

/** `POST /api/v1/tasks/bulk` (issue 31 item 3): one action on many tasks, each on its own. */
export class TaskBulkDto {
  @EnumField(TASK_BULK_ACTIONS)
  action!: TaskBulkAction;

  @TextListField(
    { max: 36, pattern: UUID_V7_PATTERN, maxItems: TASK_BULK_MAX, unique: true },
    { description: 'task ids, each once (1 … 200)' },
  )
  taskIds!: string[];
}

export class TaskBulkResultDto {
  @ApiProperty({ type: 'string', format: 'uuid' })
  readonly taskId!: string;

  @ApiProperty()
  readonly ok!: boolean;

  @ApiProperty({ type: 'string', format: 'uuid', required: false, description: '`run`: the run' })
  readonly runId?: string;

  @ApiProperty({
    required: false,
    description: 'a refusal of this task alone: its code (or reason), e.g. `not_found`',
  })
  readonly code?: string;

  @ApiProperty({ required: false })
  readonly message?: string;
}

export class TaskBulkAnswerDto {
  @ApiProperty({ enum: TASK_BULK_ACTIONS })
  readonly action!: string;

  @ApiProperty({ type: () => [TaskBulkResultDto], description: 'one per task id, in the order given' })
  readonly results!: TaskBulkResultDto[];
}
