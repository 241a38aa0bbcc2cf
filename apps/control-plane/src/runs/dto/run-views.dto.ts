import { ApiProperty } from '@nestjs/swagger';
import {
  ATTEMPT_STATUSES,
  LOG_STREAMS,
  PLACEMENT_REASONS,
  RUN_EVENT_TYPES,
  RUN_STATUSES,
  UNKNOWN_LOG_STREAM,
} from '@ql/domain';
import { PlacementSpecDto } from '../../placement/dto/placement-spec.dto';
import { TaskSpecDto } from './task-spec.dto';
import { ListOf, NULLABLE_TIME_PROP, TIME_PROP, UUID_V7_PROP, integerProp } from '../../http/view-props';

/** What the task and run routes answer (OpenAPI). */

export class TaskDto {
  @ApiProperty(UUID_V7_PROP)
  readonly id!: string;

  @ApiProperty()
  readonly name!: string;

  @ApiProperty({ ...integerProp('the current revision'), minimum: 1 })
  readonly revision!: number;

  @ApiProperty({ description: 'SHA-256 (hex) of the canonical spec' })
  readonly digest!: string;

  @ApiProperty({
    type: () => TaskSpecDto,
    description:
      'canonical: every field present (but timezone, absent for UTC, and secretEnv, absent when empty), sets sorted',
  })
  readonly spec!: TaskSpecDto;

  @ApiProperty({ description: 'a disabled task keeps its schedule; cron skips it (not part of a revision)' })
  readonly enabled!: boolean;

  @ApiProperty({ description: 'listed first (not part of a revision)' })
  readonly pinned!: boolean;

  @ApiProperty(TIME_PROP)
  readonly createdAt!: string;

  @ApiProperty(TIME_PROP)
  readonly updatedAt!: string;
}

export class TaskLastRunDto {
  @ApiProperty(UUID_V7_PROP)
  readonly id!: string;

  @ApiProperty({ enum: RUN_STATUSES })
  readonly status!: string;
}

export class TaskListItemDto extends TaskDto {
  @ApiProperty({ type: () => TaskLastRunDto, nullable: true, description: "the task's newest run" })
  readonly lastRun!: TaskLastRunDto | null;

  @ApiProperty({
    ...NULLABLE_TIME_PROP,
    description:
      'the next cron time; null without a cron, or while the task is disabled (its fires are skipped)',
  })
  readonly nextFireAt!: string | null;
}

export class UpdatedTaskDto extends TaskDto {
  @ApiProperty({ description: 'false when the digest is the same: no new revision' })
  readonly changed!: boolean;
}

export class DeletedTaskDto extends TaskDto {
  @ApiProperty({ enum: [true] })
  readonly deleted!: true;
}

export class TaskPageDto extends ListOf(TaskListItemDto, {
  description: 'pinned first, then oldest first',
  cursor: 'nextAfter',
}) {}

export class TaskRevisionDto {
  @ApiProperty(UUID_V7_PROP)
  readonly taskId!: string;

  @ApiProperty({ ...integerProp(), minimum: 1 })
  readonly revision!: number;

  @ApiProperty()
  readonly digest!: string;

  @ApiProperty({ type: () => TaskSpecDto, description: 'immutable' })
  readonly spec!: TaskSpecDto;

  @ApiProperty(TIME_PROP)
  readonly createdAt!: string;
}

export class TaskRevisionPageDto extends ListOf(TaskRevisionDto, {
  description: 'newest first',
  cursor: 'nextBefore',
  cursorType: 'integer',
}) {}

export class RunDto {
  @ApiProperty(UUID_V7_PROP)
  readonly id!: string;

  @ApiProperty(UUID_V7_PROP)
  readonly taskId!: string;

  @ApiProperty({
    type: 'string',
    nullable: true,
    required: false,
    description: "the task's name (in the list and the detail)",
  })
  readonly taskName?: string | null;

  @ApiProperty(integerProp('the pinned task revision'))
  readonly revision!: number;

  @ApiProperty()
  readonly specDigest!: string;

  @ApiProperty({ enum: RUN_STATUSES })
  readonly status!: string;

  @ApiProperty(integerProp())
  readonly version!: number;

  @ApiProperty(integerProp())
  readonly priority!: number;

  @ApiProperty({ enum: ['manual', 'cron'] })
  readonly trigger!: string;

  @ApiProperty({ ...NULLABLE_TIME_PROP, description: 'the cron time this run is for' })
  readonly scheduledAt!: string | null;

  @ApiProperty(integerProp())
  readonly attemptCount!: number;

  @ApiProperty({ type: 'string', format: 'uuid', nullable: true })
  readonly currentAttemptId!: string | null;

  @ApiProperty()
  readonly cancelRequested!: boolean;

  @ApiProperty(TIME_PROP)
  readonly createdAt!: string;

  @ApiProperty(TIME_PROP)
  readonly updatedAt!: string;

  @ApiProperty(NULLABLE_TIME_PROP)
  readonly finishedAt!: string | null;
}

export class TriggeredRunDto {
  @ApiProperty({
    description: 'false: the Idempotency-Key was seen with the same body; this is the first run',
  })
  readonly created!: boolean;

  @ApiProperty({ type: () => RunDto })
  readonly run!: RunDto;
}

export class RunPageDto extends ListOf(RunDto, { description: 'newest first', cursor: 'nextBefore' }) {}

export class AttemptDto {
  @ApiProperty(UUID_V7_PROP)
  readonly id!: string;

  @ApiProperty({ ...integerProp(), minimum: 1 })
  readonly attemptNo!: number;

  @ApiProperty({ enum: ATTEMPT_STATUSES })
  readonly status!: string;

  @ApiProperty(integerProp())
  readonly version!: number;

  @ApiProperty({ type: 'string', nullable: true })
  readonly workerId!: string | null;

  @ApiProperty({
    type: 'string',
    format: 'uuid',
    nullable: true,
    description: 'the worker session whose lease last held it',
  })
  readonly sessionId!: string | null;

  @ApiProperty({ type: 'integer', nullable: true, description: 'as the worker reported it at completion' })
  readonly exitCode!: number | null;

  @ApiProperty({
    type: 'string',
    nullable: true,
    description:
      'why it ended without a completion: the start failure’s code (`worker_shutdown`: its worker was stopped before it launched; `cancel_requested`, `bundle_unavailable` …) or `deadline_exceeded`; null otherwise',
  })
  readonly errorCode!: string | null;

  @ApiProperty({
    type: 'string',
    nullable: true,
    description:
      'the worker’s summary of how it ended (“killed because its worker was stopped before the run ended (worker_shutdown)”, “exited with code 3” …), redacted as its output is; null for a success',
  })
  readonly errorSummary!: string | null;

  @ApiProperty(integerProp())
  readonly leaseGeneration!: number;

  @ApiProperty(TIME_PROP)
  readonly createdAt!: string;

  @ApiProperty(TIME_PROP)
  readonly updatedAt!: string;

  @ApiProperty(NULLABLE_TIME_PROP)
  readonly finishedAt!: string | null;
}

export class RunEventDto {
  @ApiProperty({ ...integerProp('per run, 1..n without gaps'), minimum: 1 })
  readonly seq!: number;

  @ApiProperty({ enum: RUN_EVENT_TYPES })
  readonly type!: string;

  @ApiProperty({ type: 'string', format: 'uuid', nullable: true })
  readonly attemptId!: string | null;

  @ApiProperty(TIME_PROP)
  readonly at!: string;

  @ApiProperty({
    type: 'object',
    nullable: true,
    additionalProperties: true,
    description: 'ids and counters only',
  })
  readonly detail!: Record<string, unknown> | null;
}

export class PendingDto {
  @ApiProperty(integerProp('live candidate workers looked at'))
  readonly considered!: number;

  @ApiProperty(integerProp())
  readonly matching!: number;

  @ApiProperty({
    type: 'object',
    properties: Object.fromEntries(PLACEMENT_REASONS.map((r) => [r, { type: 'integer' }])),
    description: 'candidates refused for each reason; never a label value',
  })
  readonly reasons!: Record<string, number>;

  @ApiProperty({
    type: 'object',
    additionalProperties: { type: 'integer' },
    description:
      "of the candidates refused for `label`: how many lack each of the task's required label keys " +
      "(keys of the task's own placement, never a worker's label); only keys some candidate lacks",
  })
  readonly missingLabels!: Record<string, number>;

  @ApiProperty(TIME_PROP)
  readonly computedAt!: string;
}

export class RunLogSizeDto {
  @ApiProperty(integerProp('output bytes stored (UTF-8), the truncation marker not counted'))
  readonly bytes!: number;

  @ApiProperty({ description: 'the per-run cap cut the output (a marker entry says where)' })
  readonly truncated!: boolean;
}

export class RunDetailDto extends RunDto {
  @ApiProperty({ type: () => RunLogSizeDto })
  readonly log!: RunLogSizeDto;

  @ApiProperty({ type: () => PlacementSpecDto, description: "normalised with the task's own requirements" })
  readonly placement!: PlacementSpecDto;

  @ApiProperty({
    type: () => PendingDto,
    nullable: true,
    description: 'why a queued run is not placed (R-PLC-3); null unless queued',
  })
  readonly pending!: PendingDto | null;

  @ApiProperty({ type: () => [AttemptDto] })
  readonly attempts!: AttemptDto[];

  @ApiProperty({ type: () => [RunEventDto], description: 'the first 200, by seq' })
  readonly events!: RunEventDto[];

  @ApiProperty({
    type: () => [RunEnvVarDto],
    description:
      'the global env vars the run received, in order (ADR 0061): names and versions, never values; the task’s own env and secretEnv are in its revision',
  })
  readonly envVars!: RunEnvVarDto[];
}

export class RunEnvVarDto {
  @ApiProperty()
  readonly name!: string;

  @ApiProperty(integerProp('the version of its value the run received'))
  readonly version!: number;

  @ApiProperty({ description: 'a secret one: its value was delivered per lease and redacted from the log' })
  readonly secret!: boolean;
}

export class LogEntryDto {
  @ApiProperty({ ...integerProp("position in the run's log, 1..n across its attempts"), minimum: 1 })
  readonly position!: number;

  @ApiProperty(UUID_V7_PROP)
  readonly attemptId!: string;

  @ApiProperty({
    type: 'integer',
    nullable: true,
    description: "the worker's chunk sequence; null for the marker",
  })
  readonly seq!: number | null;

  @ApiProperty({
    enum: ['output', 'truncated'],
    description: '`truncated`: the one marker kept where the cap was reached',
  })
  readonly kind!: string;

  @ApiProperty({
    enum: [...LOG_STREAMS, UNKNOWN_LOG_STREAM],
    description:
      "where the text came from: the task's `stdout` or `stderr`; `system` for a truncation marker (the worker's or the control plane's), text the task did not write; `unknown` for output stored before streams were kept (ADR 0032)",
  })
  readonly stream!: string;

  @ApiProperty({
    description:
      'the output, neutralized for a terminal or a browser: tab and LF kept; CR, ESC and every other control, bidi and zero-width format characters, line/paragraph separators and lone surrogates are shown as `\\u` and four lowercase hex digits (`\\u{…}` above U+FFFF), e.g. `\\u000d`, `\\u001b`, `\\u202e` (ADR 0032)',
  })
  readonly text!: string;

  @ApiProperty(TIME_PROP)
  readonly at!: string;
}

export class LogPageDto {
  @ApiProperty({ type: () => [LogEntryDto], description: 'by position' })
  readonly items!: LogEntryDto[];

  @ApiProperty(
    integerProp('pass as ?after= for the next page: the last position here, or the `after` asked when empty'),
  )
  readonly nextAfter!: number;

  @ApiProperty({ description: 'the run is terminal: an empty page after this means the tail is complete' })
  readonly runEnded!: boolean;

  @ApiProperty({ description: "the run's output reached its cap; later output was dropped" })
  readonly truncated!: boolean;
}
