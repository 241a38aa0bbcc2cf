import { ClaimedOffer, UnavailableError } from '@ql/domain';
import {
  EXECUTION_OFFER_MAX_BYTES,
  EXECUTION_OFFER_SCHEMA,
  ExecutionOffer,
  WireVersion,
  buildOfferedLease,
  offerSpecFor,
} from '@ql/contracts';

/** Everything of an offer but the spec: schema, fixed keys, five UUIDs, integers, one timestamp. */
const OFFER_ENVELOPE_BYTES = 1024;

/**
 * The committed claim as `qinglong/remote-execution-offer@v1`; an oversized projection is a 503, never
 * sent. For a v1 session the spec is its v1 projection (ADR 0060 §7: no time zone, its own digest); a
 * spec with `secretEnv` or `bundle` has none and goes as it is (placement does not keep it from a v1
 * session yet: issue 30 item 2, left for the next step).
 */
export function projectOffer(offer: ClaimedOffer, version: WireVersion = 2): ExecutionOffer {
  const execution = offerSpecFor(version, offer.revision.spec, offer.revision.digest) ?? {
    digest: offer.revision.digest,
    spec: offer.revision.spec,
  };
  const projected: ExecutionOffer = {
    schema: EXECUTION_OFFER_SCHEMA,
    status: 'offered',
    run: {
      runId: offer.run.id,
      taskId: offer.run.taskId,
      revision: offer.run.revision,
      attemptId: offer.attempt.id,
      attemptNo: offer.attempt.attemptNo,
    },
    execution: { digest: execution.digest, spec: execution.spec },
    lease: buildOfferedLease(offer.lease),
  };
  // The stored spec's size plus a bounded envelope (ids, integers, one timestamp) bounds the answer.
  if (offer.revision.specBytes + OFFER_ENVELOPE_BYTES > EXECUTION_OFFER_MAX_BYTES) {
    throw new UnavailableError('offer_too_large', 'the offer projection is over 128 KiB');
  }
  return projected;
}
