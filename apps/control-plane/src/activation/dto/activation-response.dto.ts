import { ApiProperty } from '@nestjs/swagger';
import { ATTEMPT_STATUSES, AttemptStatus, RUN_STATUSES, RunStatus } from '@ql/domain';
import {
  ACTIVATION_STATUSES,
  ActivationSnapshot,
  ActivationStatus,
  LOG_OUTCOMES,
  LogsResponse,
  RUN_ACTIVATION_SCHEMA,
  RunActivationResponse,
} from '@ql/contracts';
import { UUID_V7_PROP, integerProp } from '../../http/view-props';

/** `qinglong/remote-run-activation@v1` (R-ACT-3) and the `logs` answer, for the OpenAPI document. */

const ABSENT = 'absent until it is known (never null)';

export class ActivationSnapshotDto implements ActivationSnapshot {
  @ApiProperty(UUID_V7_PROP)
  readonly runId!: string;

  @ApiProperty(UUID_V7_PROP)
  readonly attemptId!: string;

  @ApiProperty({ enum: RUN_STATUSES })
  readonly runStatus!: RunStatus;

  @ApiProperty({ enum: ATTEMPT_STATUSES })
  readonly attemptStatus!: AttemptStatus;

  @ApiProperty(integerProp('the lease version now; pass it as `leaseVersion` next'))
  readonly leaseVersion!: number;

  @ApiProperty(integerProp())
  readonly leaseGeneration!: number;

  @ApiProperty(
    integerProp(
      "the worker's acknowledgements applied to the attempt: starting 1, running 2, final 3; an ending the control plane wrote (deadline, lease expiry) does not count",
    ),
  )
  readonly callbackSequence!: number;

  @ApiProperty({ required: false, format: 'date-time', description: `start + the task timeout; ${ABSENT}` })
  readonly deadlineAt?: string;

  @ApiProperty({ required: false, format: 'date-time', description: ABSENT })
  readonly startedAt?: string;

  @ApiProperty({ required: false, format: 'date-time', description: ABSENT })
  readonly finishedAt?: string;

  @ApiProperty({ required: false, description: ABSENT })
  readonly executorHandle?: string;

  @ApiProperty({ required: false, description: 'not given by this control plane' })
  readonly logId?: string;

  @ApiProperty({ required: false, description: ABSENT })
  readonly errorCode?: string;
}

export class ActivationResponseDto implements RunActivationResponse {
  @ApiProperty({ enum: [RUN_ACTIVATION_SCHEMA] })
  readonly schema!: typeof RUN_ACTIVATION_SCHEMA;

  @ApiProperty({
    enum: ACTIVATION_STATUSES,
    description:
      '`applied`, or an exact replay / late callback answered with the current state, nothing written',
  })
  readonly status!: ActivationStatus;

  @ApiProperty({ type: () => ActivationSnapshotDto })
  readonly snapshot!: ActivationSnapshotDto;
}

export class LogAppendResponseDto implements LogsResponse {
  @ApiProperty({
    enum: LOG_OUTCOMES,
    description: '`dropped`: accepted past the run’s log cap and not kept',
  })
  readonly outcome!: (typeof LOG_OUTCOMES)[number];

  @ApiProperty({ description: 'the run’s output reached its cap (one marker is stored)' })
  readonly truncated!: boolean;
}
