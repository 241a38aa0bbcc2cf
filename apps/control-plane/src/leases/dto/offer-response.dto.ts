import { ApiProperty, getSchemaPath } from '@nestjs/swagger';
import { IDLE_REASONS, IdleReason } from '@ql/domain';
import {
  EXECUTION_OFFER_MAX_BYTES,
  EXECUTION_OFFER_SCHEMA,
  ExecutionOffer,
  IdleOffer,
  OfferedLease,
  ReleaseResponse,
  RenewResponse,
} from '@ql/contracts';
import { TaskSpecDto } from '../../runs/dto/task-spec.dto';
import { UUID_V7_PROP, integerProp } from '../../http/view-props';

/** `qinglong/remote-execution-offer@v1` (R-LSE-2) and the renew/release answers, for the OpenAPI document. */

export class OfferedLeaseDto implements OfferedLease {
  @ApiProperty(UUID_V7_PROP)
  readonly offerId!: string;

  @ApiProperty(integerProp('the session generation that holds the lease'))
  readonly sessionGeneration!: number;

  @ApiProperty(integerProp('a new one each time the attempt is claimed'))
  readonly leaseGeneration!: number;

  @ApiProperty(integerProp('pass as `leaseVersion` in the next renew or release'))
  readonly version!: number;

  @ApiProperty({ format: 'date-time', description: 'database time; unrenewed, the lease expires then' })
  readonly expiresAt!: string;
}

export class OfferedRunDto {
  @ApiProperty(UUID_V7_PROP)
  readonly runId!: string;

  @ApiProperty(UUID_V7_PROP)
  readonly taskId!: string;

  @ApiProperty(integerProp('the pinned task revision'))
  readonly revision!: number;

  @ApiProperty(UUID_V7_PROP)
  readonly attemptId!: string;

  @ApiProperty(integerProp())
  readonly attemptNo!: number;
}

export class OfferedExecutionDto {
  @ApiProperty({ pattern: '^[0-9a-f]{64}$', description: 'SHA-256 of the canonical JSON of `spec`' })
  readonly digest!: string;

  @ApiProperty({
    type: () => TaskSpecDto,
    description: 'the pinned revision, canonical: every field present',
  })
  readonly spec!: TaskSpecDto;
}

export class ExecutionOfferDto implements Omit<ExecutionOffer, 'execution'> {
  @ApiProperty({ enum: [EXECUTION_OFFER_SCHEMA] })
  readonly schema!: typeof EXECUTION_OFFER_SCHEMA;

  @ApiProperty({ enum: ['offered'] })
  readonly status!: 'offered';

  @ApiProperty({ type: () => OfferedRunDto })
  readonly run!: OfferedRunDto;

  @ApiProperty({ type: () => OfferedExecutionDto })
  readonly execution!: OfferedExecutionDto;

  @ApiProperty({ type: () => OfferedLeaseDto, description: 'never the token or its digest' })
  readonly lease!: OfferedLeaseDto;
}

export class IdleDto {
  @ApiProperty({ enum: IDLE_REASONS })
  readonly reason!: IdleReason;

  @ApiProperty(integerProp())
  readonly activeLeases!: number;

  @ApiProperty(integerProp())
  readonly capacity!: number;

  @ApiProperty(integerProp('queued attempts looked at'))
  readonly scanned!: number;
}

export class IdleOfferDto implements IdleOffer {
  @ApiProperty({ enum: [EXECUTION_OFFER_SCHEMA] })
  readonly schema!: typeof EXECUTION_OFFER_SCHEMA;

  @ApiProperty({ enum: ['idle'] })
  readonly status!: 'idle';

  @ApiProperty({ type: () => IdleDto })
  readonly idle!: IdleDto;
}

/** The `offers` answer: one of the two, told apart by `status`. */
export const OFFER_RESPONSE = {
  description: `\`${EXECUTION_OFFER_SCHEMA}\`, at most ${EXECUTION_OFFER_MAX_BYTES / 1024} KiB: a committed claim, or idle`,
  schema: {
    oneOf: [{ $ref: getSchemaPath(ExecutionOfferDto) }, { $ref: getSchemaPath(IdleOfferDto) }],
    discriminator: {
      propertyName: 'status',
      mapping: { offered: getSchemaPath(ExecutionOfferDto), idle: getSchemaPath(IdleOfferDto) },
    },
  },
};

export class RenewResponseDto implements RenewResponse {
  @ApiProperty({ type: () => OfferedLeaseDto })
  readonly lease!: OfferedLeaseDto;

  @ApiProperty({ description: 'an admin asked to cancel the run: stop it and report (R-RUN-5)' })
  readonly cancelRequested!: boolean;
}

export class ReleaseResponseDto implements ReleaseResponse {
  @ApiProperty({ type: () => OfferedLeaseDto })
  readonly lease!: OfferedLeaseDto;
}
