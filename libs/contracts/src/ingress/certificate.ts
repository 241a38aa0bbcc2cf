/**
 * `certificate` (ADR 0045 §3): rotation over mTLS (`POST …/workers/{workerId}/certificate`), a CSR
 * over a new key with the current certificate; answered with the next certificate and its chain.
 *
 * Field history (`git log -S` on the contracts and the worker's reader it came from). Served since
 * 71c9353 (2026-12-05); first spoken by a worker in 2251fca (2026-12-05): its v1.
 *
 * | field                                                          | appeared           | wire |
 * | -------------------------------------------------------------- | ------------------ | ---- |
 * | request `csr`                                                  | 71c9353 2026-12-05 | v1   |
 * | answer: as `enroll`'s                                          | 71c9353 2026-12-05 | v1   |
 * | refusals 400 `csr_refused`; 403 `worker_disabled`, `certificate_revoked`, `certificate_unknown`; 409 `certificate_superseded`; 503 `enrollment_disabled` | 71c9353 2026-12-05 | v1 |
 */
import type { KeyObject } from 'node:crypto';
import { readObject, readString } from '@ql/domain';
import { CSR_MAX_LENGTH } from './enroll';
import { IssuedCertificateResponse, issuingCall, parseIssuedCertificate } from './issued-certificate';

export const CERTIFICATE = issuingCall('certificate', [
  { status: 403, code: 'certificate_revoked', since: 1 },
  { status: 403, code: 'certificate_unknown', since: 1 },
  { status: 409, code: 'certificate_superseded', since: 1 },
]);

export interface CertificateRequest {
  /** PEM PKCS#10 request over a new key made for this renewal. */
  readonly csr: string;
}

/** The worker's `certificate` body. */
export function buildCertificateRequest(fields: CertificateRequest): CertificateRequest {
  return { csr: fields.csr };
}

/** The shape of a `certificate` body (the CSR's own rules are the rotation service's). */
export function parseCertificateRequest(body: unknown): CertificateRequest {
  const raw = readObject(body, '', ['csr']);
  return { csr: readString(raw.csr, 'csr', { max: CSR_MAX_LENGTH, multiline: true }) };
}

/** The worker's strict reader of the `certificate` answer: for this worker, over the new key. */
export function parseCertificateAnswer(
  bytes: string | Buffer,
  workerId: string,
  privateKey: KeyObject,
): IssuedCertificateResponse {
  return parseIssuedCertificate('certificate', bytes, workerId, privateKey);
}
