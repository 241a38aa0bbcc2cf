import { ApiProperty } from '@nestjs/swagger';
import {
  ENROLLMENT_LIMITS,
  ENROLLMENT_TOKEN_STATUSES,
  ENROLLMENT_WORKER_PATTERN,
  EnrollmentTokenStatus,
  WORKER_ID_PATTERN,
} from '@ql/domain';
import { BoolField, IntField, TextField } from '../../http/validation/dto-fields';
import { ListOf, NULLABLE_TIME_PROP, TIME_PROP, UUID_V7_PROP } from '../../http/view-props';

const { ttlMinSeconds, ttlMaxSeconds, ttlDefaultSeconds, patternMaxLength, patternMaxWorkers } =
  ENROLLMENT_LIMITS;

/** `POST /api/v1/enrollment-tokens` (ADR 0045 §1): exactly one of `workerId` and `pattern`. */
export class CreateEnrollmentTokenDto {
  @TextField(
    { max: 63, pattern: WORKER_ID_PATTERN },
    { presence: 'optional', description: 'the one worker id the token enrolls (or give `pattern`)' },
  )
  workerId?: string;

  @TextField(
    { max: patternMaxLength, pattern: ENROLLMENT_WORKER_PATTERN },
    {
      presence: 'optional',
      description:
        'worker ids the token enrolls: worker-id characters and one `*` standing for one or more of them (`router-*`, `*-edge`); matched as a prefix and a suffix, never a regex',
    },
  )
  pattern?: string;

  @IntField(1, patternMaxWorkers, {
    presence: 'optional',
    description: 'with `pattern` (required there): how many worker ids it enrolls, each once',
  })
  count?: number;

  @IntField(ttlMinSeconds, ttlMaxSeconds, {
    presence: 'optional',
    default: ttlDefaultSeconds,
    description: 'seconds until the token expires',
  })
  ttlSeconds?: number;

  @BoolField({
    presence: 'optional',
    default: false,
    description:
      'with `pattern` only: it may also enroll an id that has a current certificate or a live session, replacing it (by default such an id is refused, `enrollment_token_may_not_replace`)',
  })
  mayReplace?: boolean;
}

/** A token as listed: never the token or its digest. */
export class EnrollmentTokenDto {
  @ApiProperty(UUID_V7_PROP)
  readonly id!: string;

  @ApiProperty({ type: 'string', nullable: true, pattern: WORKER_ID_PATTERN.source })
  readonly workerId!: string | null;

  @ApiProperty({ type: 'string', nullable: true, example: 'router-*' })
  readonly pattern!: string | null;

  @ApiProperty({ type: 'integer', minimum: 1, maximum: patternMaxWorkers, description: '1 for a worker id' })
  readonly maxWorkers!: number;

  @ApiProperty({ type: 'integer', description: 'worker ids it enrolled so far' })
  readonly uses!: number;

  @ApiProperty({
    enum: ENROLLMENT_TOKEN_STATUSES,
    description:
      'by the database clock: `revoked`, else `expired`, else `exhausted` (every use taken), else `active`',
  })
  readonly status!: EnrollmentTokenStatus;

  @ApiProperty(TIME_PROP)
  readonly expiresAt!: string;

  @ApiProperty(NULLABLE_TIME_PROP)
  readonly revokedAt!: string | null;

  @ApiProperty({
    type: 'boolean',
    description: 'a pattern token that may enroll an id with a current certificate or a live session',
  })
  readonly mayReplace!: boolean;

  @ApiProperty({ description: 'the API key id that made it, or `cli`' })
  readonly createdBy!: string;

  @ApiProperty(TIME_PROP)
  readonly createdAt!: string;
}

export class CreatedEnrollmentTokenDto extends EnrollmentTokenDto {
  @ApiProperty({
    pattern: '^qlet_[A-Za-z0-9_-]{43}$',
    description: 'the token itself: shown once, only its SHA-256 is stored; give it to the new machine',
  })
  readonly token!: string;
}

export class EnrollmentTokenPageDto extends ListOf(EnrollmentTokenDto, {
  description: 'oldest first',
  cursor: 'nextAfter',
}) {}
