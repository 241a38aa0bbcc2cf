import {
  GENERATION_MAX,
  LEASE_TOKEN_MAX_LENGTH,
  LEASE_TOKEN_PATTERN,
  LeaseFence,
  PullRequest,
  UUID_LENGTH,
  UUID_V7_PATTERN,
  VERSION_MAX,
} from '@ql/domain';
import { IntField, TextField } from '../../http/validation/dto-fields';
import { SessionFenceDto } from '../../registry/dto/session-fence.dto';

/** `offers` body (R-LSE-2): the session fence, the worker's offer id and its lease token. */
export class PullRequestDto extends SessionFenceDto implements PullRequest {
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

/** `renew` and `release` body (R-LSE-4, R-LSE-5): the pull fence and the lease's own fence. */
export class LeaseFenceDto extends PullRequestDto implements LeaseFence {
  @IntField(1, GENERATION_MAX)
  leaseGeneration!: number;

  @IntField(0, VERSION_MAX, { description: 'the lease version the last answer carried' })
  leaseVersion!: number;
}
