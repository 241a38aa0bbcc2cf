/** The answers of `renew` and `release`: the lease projection (and, for renew, the cancel flag). */
import { LeaseRecord, ValidationError, readObject } from '@ql/domain';
import { IngressCall, KiB, answerJson, refusing } from './call';
import { OfferContractError } from './offers';
import {
  OfferedLease,
  buildLeaseFence,
  buildOfferedLease,
  parseLeaseFence,
  readOfferedLease,
} from './lease-fence';

/** A lease answer is a few hundred bytes. */
export const LEASE_ANSWER_MAX_BYTES = 4 * KiB;

/** What renew answers with: the lease projection and whether a cancel was requested (R-RUN-5). */
export interface RenewResponse {
  readonly lease: OfferedLease;
  readonly cancelRequested: boolean;
}

/** What release answers with: the ended lease's projection. */
export interface ReleaseResponse {
  readonly lease: OfferedLease;
}

/** The control plane's `renew` answer: the renewed lease and whether its run has a cancel request. */
export function buildRenewResponse(lease: LeaseRecord, cancelRequested: boolean): RenewResponse {
  return { lease: buildOfferedLease(lease), cancelRequested };
}

/** The control plane's `release` answer: the ended lease. */
export function buildReleaseResponse(lease: LeaseRecord): ReleaseResponse {
  return { lease: buildOfferedLease(lease) };
}

/**
 * The worker's strict reader of a `renew` (lease and `cancelRequested`) or `release` (lease only)
 * answer from its bytes: strict JSON, exact shape, no unknown fields, the lease projection's ranges.
 */
export function readLeaseAnswer(
  bytes: string | Buffer,
  action: 'renew' | 'release',
): RenewResponse | ReleaseResponse {
  const json = answerJson(action, bytes, LEASE_ANSWER_MAX_BYTES);
  return refusing(
    action,
    () => {
      if (action === 'release') return { lease: readOfferedLease(readObject(json, '', ['lease']).lease) };
      const top = readObject(json, '', ['lease', 'cancelRequested']);
      if (typeof top.cancelRequested !== 'boolean')
        throw new ValidationError('cancelRequested', 'must_be_boolean');
      return { lease: readOfferedLease(top.lease), cancelRequested: top.cancelRequested };
    },
    (rule) => new OfferContractError(rule),
  );
}

/** `renew` and `release`: the lease fence alone, answered with the lease (renew: and its cancel flag). */
export function leaseFenceCall<A extends 'renew' | 'release'>(action: A) {
  const call: IngressCall<A> = {
    action,
    bodyLimit: 4 * KiB,
    answerLimit: LEASE_ANSWER_MAX_BYTES,
    firstReleased: 'bb721f9',
    since: {},
    refusals: [],
  };
  return {
    call,
    /** The worker's body in wire order. */
    build: buildLeaseFence,
    /** The control plane's reader of the body (behind the DTO, ADR 0009). */
    parseRequest: parseLeaseFence,
    /** The worker's strict reader of the answer, from its bytes. */
    parseAnswer: (bytes: string | Buffer) =>
      readLeaseAnswer(bytes, action) as A extends 'renew' ? RenewResponse : ReleaseResponse,
  };
}
