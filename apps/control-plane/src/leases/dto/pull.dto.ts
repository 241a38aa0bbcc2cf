import {
  GENERATION_MAX,
  LEASE_TOKEN_MAX_LENGTH,
  LEASE_TOKEN_PATTERN,
  OFFER_WAIT_MAX_MS,
  UUID_LENGTH,
  UUID_V7_PATTERN,
  VERSION_MAX,
} from '@ql/domain';
import { LeaseFenceRequest, OfferFieldsRequest, PullRequest } from '@ql/contracts';
import { IntField, TextField } from '../../http/validation/dto-fields';
import { SessionFenceDto } from '../../registry/dto/session-fence.dto';

/** The session fence, the worker's offer id and its lease token: what every lease call carries. */
export class OfferFieldsDto extends SessionFenceDto implements OfferFieldsRequest {
  @TextField(
    { max: UUID_LENGTH, pattern: UUID_V7_PATTERN },
    { description: 'UUIDv7 the worker makes; the same id and token replay the offer' },
  )
  offerId!: string;

  @TextField(
    { max: LEASE_TOKEN_MAX_LENGTH, pattern: LEASE_TOKEN_PATTERN },
    { description: '≥ 256 random bits, base64url without padding; only its digest is stored' },
  )
  leaseToken!: string;
}

/** `offers` body (R-LSE-2): the offer fields and how long to wait for a run (long poll, ADR 0019). */
export class PullRequestDto extends OfferFieldsDto implements PullRequest {
  @IntField(0, OFFER_WAIT_MAX_MS, {
    presence: 'optional',
    default: 0,
    description:
      'long poll: with no claimable run, hold the pull up to this many ms (capped by the control plane) and offer a run queued meanwhile; 0 or absent answers idle at once',
  })
  waitMs?: number;
}

/** `renew` and `release` body (R-LSE-4, R-LSE-5): the pull fence and the lease's own fence. */
export class LeaseFenceDto extends OfferFieldsDto implements LeaseFenceRequest {
  @IntField(1, GENERATION_MAX)
  leaseGeneration!: number;

  @IntField(0, VERSION_MAX, { description: 'the lease version the last answer carried' })
  leaseVersion!: number;
}
