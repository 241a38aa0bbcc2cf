import { ApiProperty } from '@nestjs/swagger';
import { SESSION_STATUSES, SessionStatus, WORKER_ID_PATTERN } from '@ql/domain';
import { HeartbeatResponse, MAX_HEARTBEAT_CANCELS, RegisterResponse, SessionResponse } from '@ql/contracts';

/** The session projection every session action answers with. */
export class SessionResponseDto implements SessionResponse {
  @ApiProperty({ pattern: WORKER_ID_PATTERN.source })
  readonly workerId!: string;

  @ApiProperty({ format: 'uuid', description: 'UUIDv7' })
  readonly sessionId!: string;

  @ApiProperty({ type: 'integer', minimum: 1, description: 'pass as `generation` in every later call' })
  readonly generation!: number;

  @ApiProperty({ type: 'integer', minimum: 0, description: 'pass as `expectedVersion` in the next call' })
  readonly version!: number;

  @ApiProperty({ enum: SESSION_STATUSES })
  readonly status!: SessionStatus;

  @ApiProperty({ format: 'date-time', description: 'database time' })
  readonly leaseExpiresAt!: string;

  @ApiProperty({ type: 'integer' })
  readonly maxConcurrentRuns!: number;

  @ApiProperty({
    type: 'integer',
    description:
      'what the worker can take right now; a claim needs active leases < maxConcurrentRuns and < availableSlots',
  })
  readonly availableSlots!: number;
}

export class HeartbeatResponseDto extends SessionResponseDto implements HeartbeatResponse {
  @ApiProperty({
    type: 'array',
    items: { type: 'string', format: 'uuid' },
    maxItems: MAX_HEARTBEAT_CANCELS,
    description:
      'attempts this session holds whose run has a cancel request (R-RUN-5): stop them and report `cancelled`; id order, at most 64',
  })
  readonly cancelAttemptIds!: string[];
}

export class RegisterResponseDto extends SessionResponseDto implements RegisterResponse {
  @ApiProperty({
    enum: ['created', 'replayed', 'replaced'],
    description: 'replayed: same session, same content; replaced: a new session fenced the old one',
  })
  readonly outcome!: RegisterResponse['outcome'];
}
