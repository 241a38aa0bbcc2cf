import { ReleaseResponse, RenewResponse, parseReleaseAnswer, parseRenewAnswer } from '@ql/contracts';

/** The `renew` answer from its bytes: the contract's strict reader (ingress/renew.ts). */
export function readRenew(bytes: Buffer): RenewResponse {
  return parseRenewAnswer(bytes);
}

/** The `release` answer from its bytes: the contract's strict reader (ingress/release.ts). */
export function readRelease(bytes: Buffer): ReleaseResponse {
  return parseReleaseAnswer(bytes);
}
