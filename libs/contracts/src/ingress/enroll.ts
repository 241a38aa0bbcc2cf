/**
 * `enroll` (ADR 0045 §2): a worker with no certificate joins with an enrollment token and a CSR over
 * its own key, over server-authenticated TLS (`POST /api/v3/worker-ingress/enroll`); answered with
 * the certificate issued and its chain.
 *
 * Field history (`git log -S` on the contracts and the worker's reader it came from). Served since
 * 2e8b38b (2026-12-05); first spoken by a worker in 2251fca (2026-12-05): its v1.
 *
 * | field                                                          | appeared           | wire |
 * | -------------------------------------------------------------- | ------------------ | ---- |
 * | request `workerId`, `token`, `csr`                             | 2e8b38b 2026-12-05 | v1   |
 * | answer `workerId`, `certificatePem`, `chainPem`, `fingerprint`, `serial`, `notAfter` | 2e8b38b 2026-12-05 | v1 |
 * | refusals 400 `csr_refused`; 403 `enrollment_token_invalid`, `enrollment_token_wrong_worker`, `worker_disabled`; 409 `enrollment_token_used`, `enrollment_token_exhausted`; 503 `enrollment_disabled` | 2e8b38b 2026-12-05 | v1 |
 * | refusal 409 `enrollment_token_may_not_replace`                 | 06e806a 2026-12-07 | v2   |
 */
import type { KeyObject } from 'node:crypto';
import { WORKER_ID_PATTERN, readObject, readString } from '@ql/domain';
import { KiB } from './call';
import { IssuedCertificateResponse, issuingCall, parseIssuedCertificate } from './issued-certificate';

/** A CSR is PEM: an RSA-4096 one is under 2 KiB; the body's limit leaves room. */
export const CSR_MAX_LENGTH = 15 * KiB;
export const ENROLLMENT_TOKEN_MAX_LENGTH = 256;

export const ENROLL = issuingCall('enroll', [
  { status: 403, code: 'enrollment_token_invalid', since: 1 },
  { status: 403, code: 'enrollment_token_wrong_worker', since: 1 },
  { status: 409, code: 'enrollment_token_used', since: 1 },
  { status: 409, code: 'enrollment_token_exhausted', since: 1 },
  { status: 409, code: 'enrollment_token_may_not_replace', since: 2 },
]);

export interface EnrollRequest {
  /** The worker id to enroll. */
  readonly workerId: string;
  /** The enrollment token (`qlet_…`) an admin made for this id or a pattern it matches. */
  readonly token: string;
  /** PEM PKCS#10 request over a key the worker made. */
  readonly csr: string;
}

/** The worker's `enroll` body in wire order. */
export function buildEnrollRequest(fields: EnrollRequest): EnrollRequest {
  return { workerId: fields.workerId, token: fields.token, csr: fields.csr };
}

/** The shape of an `enroll` body (the token's and the CSR's own rules are the enrollment service's). */
export function parseEnrollRequest(body: unknown): EnrollRequest {
  const raw = readObject(body, '', ['workerId', 'token', 'csr']);
  return {
    workerId: readString(raw.workerId, 'workerId', { max: 63, pattern: WORKER_ID_PATTERN }),
    token: readString(raw.token, 'token', { max: ENROLLMENT_TOKEN_MAX_LENGTH }),
    csr: readString(raw.csr, 'csr', { max: CSR_MAX_LENGTH, multiline: true }),
  };
}

/** The worker's strict reader of the `enroll` answer: for this worker, over the key it sent. */
export function parseEnrollAnswer(
  bytes: string | Buffer,
  workerId: string,
  privateKey: KeyObject,
): IssuedCertificateResponse {
  return parseIssuedCertificate('enroll', bytes, workerId, privateKey);
}
