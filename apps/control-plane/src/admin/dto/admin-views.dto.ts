import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ATTEMPT_STATUSES,
  API_KEY_ROLES,
  ApiKeyRole,
  Capabilities,
  WORKER_ID_PATTERN,
  WORKER_STATUSES,
  WorkerStatus,
} from '@ql/domain';
import { CapabilitiesDto } from '../../registry/dto/register.dto';
import { ListOf, NULLABLE_TIME_PROP, TIME_PROP } from '../../http/view-props';

/** What the admin routes of workers, API keys, certificates and the audit log answer (OpenAPI). */

export class WorkerDto {
  @ApiProperty({ pattern: WORKER_ID_PATTERN.source })
  readonly workerId!: string;

  @ApiProperty({ description: 'a disabled worker cannot register a session' })
  readonly disabled!: boolean;

  @ApiProperty({
    enum: WORKER_STATUSES,
    description:
      'effective status by the database clock, as `?status=` filters and `/metrics` counts it: `online` and `draining` are a live session; `expired` its lease passed (the process stopped or lost the control plane); `offline` it stopped cleanly; `disabled` an operator disabled it (ADR 0035)',
  })
  readonly status!: WorkerStatus;

  @ApiProperty({ format: 'uuid' })
  readonly sessionId!: string;

  @ApiProperty({ type: 'integer' })
  readonly generation!: number;

  @ApiProperty({ type: 'integer' })
  readonly version!: number;

  @ApiProperty(TIME_PROP)
  readonly leaseExpiresAt!: string;

  @ApiProperty({ type: 'integer' })
  readonly maxConcurrentRuns!: number;

  @ApiProperty({ type: 'integer' })
  readonly availableSlots!: number;

  @ApiProperty()
  readonly softwareVersion!: string;

  @ApiProperty({
    type: 'integer',
    description:
      'the protocol version the session registered with: the one negotiated (3: wire v1, 4: wire v2; ADR 0060)',
  })
  readonly protocolVersion!: number;

  @ApiProperty({
    type: 'integer',
    enum: [1, 2],
    description:
      'the wire version the control plane speaks to this session (from protocolVersion): v1 answers carry no field added since (ADR 0056, ADR 0060)',
  })
  readonly wireVersion!: number;

  @ApiProperty({ type: () => CapabilitiesDto, description: 'canonical: sets sorted, every field present' })
  readonly capabilities!: Capabilities;

  @ApiProperty({ description: 'SHA-256 (hex) of the canonical capabilities' })
  readonly capabilitiesDigest!: string;

  @ApiProperty(TIME_PROP)
  readonly registeredAt!: string;

  @ApiProperty(TIME_PROP)
  readonly lastSeenAt!: string;

  @ApiProperty({
    type: 'integer',
    minimum: 0,
    description:
      "journal records of the worker waiting for an operator (recovery_required), as its session's last heartbeat said; while above 0 the worker does not pull (ADR 0029)",
  })
  readonly recoveryRequired!: number;

  @ApiProperty({
    ...NULLABLE_TIME_PROP,
    description:
      'when its current certificate issued here (enrollment or renewal, neither superseded nor revoked; ADR 0045 §4) was issued; null when it has none (a certificate made by hand or by `npm run pki`)',
  })
  readonly certificateIssuedAt!: string | null;

  @ApiProperty({
    ...NULLABLE_TIME_PROP,
    description:
      'when that certificate expires (its notAfter); the worker renews it at 2/3 of its life; null as for certificateIssuedAt',
  })
  readonly certificateNotAfter!: string | null;
}

export class WorkerPageDto extends ListOf(WorkerDto, { cursor: 'nextAfter' }) {}

/** A live lease of the worker: never its token or token digest. */
export class WorkerActiveRunDto {
  @ApiProperty({ format: 'uuid' })
  readonly runId!: string;

  @ApiProperty({ format: 'uuid' })
  readonly attemptId!: string;

  @ApiProperty({ type: 'integer', minimum: 1 })
  readonly attemptNo!: number;

  @ApiProperty({ enum: ATTEMPT_STATUSES })
  readonly attemptStatus!: string;

  @ApiProperty({ format: 'uuid', description: 'the lease (its offer id)' })
  readonly offerId!: string;

  @ApiProperty({ format: 'uuid', description: 'the session holding it (an old session may still hold one)' })
  readonly sessionId!: string;

  @ApiProperty({ type: 'integer' })
  readonly leaseGeneration!: number;

  @ApiProperty(TIME_PROP)
  readonly leaseExpiresAt!: string;

  @ApiProperty(NULLABLE_TIME_PROP)
  readonly startedAt!: string | null;

  @ApiProperty(NULLABLE_TIME_PROP)
  readonly deadlineAt!: string | null;
}

export class WorkerDetailDto extends WorkerDto {
  @ApiProperty({
    type: 'string',
    nullable: true,
    pattern: '^[0-9a-f]{64}$',
    description:
      'SHA-256 (hex) of its current certificate: the one last issued to it by enrollment or renewal (ADR 0045 §4), else (a certificate not issued here) the one its current session registered with; null for a session registered before it was recorded',
  })
  readonly certificateFingerprint!: string | null;

  @ApiProperty({
    type: () => [WorkerActiveRunDto],
    description: 'live leases of any of its sessions, soonest expiry first (at most 1024)',
  })
  readonly activeRuns!: WorkerActiveRunDto[];
}

export class DeletedWorkerDto extends WorkerDto {
  @ApiProperty({ enum: [true] })
  readonly deleted!: true;
}

export class ApiKeyDto {
  @ApiProperty({ format: 'uuid' })
  readonly id!: string;

  @ApiProperty()
  readonly name!: string;

  @ApiProperty({ enum: API_KEY_ROLES })
  readonly role!: ApiKeyRole;

  @ApiProperty(TIME_PROP)
  readonly createdAt!: string;

  @ApiProperty(NULLABLE_TIME_PROP)
  readonly revokedAt!: string | null;
}

export class CreatedApiKeyDto extends ApiKeyDto {
  @ApiProperty({ description: 'the key itself (`qlk_…`): shown once, only its digest is stored' })
  readonly token!: string;
}

export class ApiKeyListDto extends ListOf(ApiKeyDto) {}

export class RevokedCertificateDto {
  @ApiProperty({ pattern: '^[0-9a-f]{64}$' })
  readonly fingerprint!: string;

  @ApiProperty(TIME_PROP)
  readonly revokedAt!: string;

  @ApiProperty({ type: 'string', nullable: true })
  readonly reason!: string | null;
}

export class RevokedWorkerDto {
  @ApiProperty({ pattern: WORKER_ID_PATTERN.source })
  readonly workerId!: string;

  @ApiProperty({
    type: [String],
    description: 'SHA-256 fingerprints of the certificates this call revoked (none when all were already)',
  })
  readonly fingerprints!: string[];
}

export class RevokedCertificateListDto extends ListOf(RevokedCertificateDto, {
  description: 'newest first',
}) {}

export class AuditEntryDto {
  @ApiProperty()
  readonly id!: string;

  @ApiProperty({ description: 'the API key id, or `cli`' })
  readonly actor!: string;

  @ApiProperty({ example: 'api_key.create' })
  readonly action!: string;

  @ApiProperty({ example: 'api_key:0190…' })
  readonly target!: string;

  @ApiPropertyOptional({ type: 'object', additionalProperties: true })
  readonly detail?: Record<string, unknown>;

  @ApiProperty(TIME_PROP)
  readonly at!: string;
}

export class AuditListDto extends ListOf(AuditEntryDto, { description: 'newest first' }) {}
