import { ReleaseResponse, RenewResponse, parseLeaseAnswer, parseStrictJson } from '@ql/contracts';

/** The `renew` answer from its bytes: strict JSON, then the exact shape. */
export function readRenew(bytes: Buffer): RenewResponse {
  return parseLeaseAnswer(parseStrictJson(bytes), 'renew');
}

/** The `release` answer from its bytes: strict JSON, then the exact shape. */
export function readRelease(bytes: Buffer): ReleaseResponse {
  return parseLeaseAnswer(parseStrictJson(bytes), 'release');
}
