/** The answer of `enroll` and `certificate` (ADR 0045 §2, §3): the certificate issued, then its chain. */
import { X509Certificate, type KeyObject } from 'node:crypto';
import { ValidationError, WORKER_ID_PATTERN, readObject, readString } from '@ql/domain';
import { IngressCall, KiB, Refusal, answerJson, refusing } from './call';

/** A certificate and its chain: a few KiB. */
export const ISSUED_CERTIFICATE_MAX_BYTES = 64 * KiB;

/** What both calls that issue a certificate share: its descriptor's limits and v1, and its refusals. */
export function issuingCall<A extends 'enroll' | 'certificate'>(
  action: A,
  refusals: readonly Refusal[],
): IngressCall<A> {
  return {
    action,
    bodyLimit: 16 * KiB,
    answerLimit: ISSUED_CERTIFICATE_MAX_BYTES,
    firstReleased: '2251fca',
    since: {},
    refusals: [
      { status: 400, code: 'csr_refused', since: 1 },
      { status: 403, code: 'worker_disabled', since: 1 },
      ...refusals,
      { status: 503, code: 'enrollment_disabled', since: 1 },
    ],
  };
}

/** The answer of enrollment and rotation (ADR 0045 §2, §3): PEM, the certificate then its chain. */
export interface IssuedCertificateResponse {
  readonly workerId: string;
  readonly certificatePem: string;
  /** The issuer and the certificates above it that the ingress does not need from the worker's trust. */
  readonly chainPem: string;
  readonly fingerprint: string;
  readonly serial: string;
  readonly notAfter: string;
}

const ISSUED_FIELDS = [
  'workerId',
  'certificatePem',
  'chainPem',
  'fingerprint',
  'serial',
  'notAfter',
] as const;
const PEM = { max: ISSUED_CERTIFICATE_MAX_BYTES, multiline: true, min: 0 } as const;
const HEX = /^[0-9a-f]+$/;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * The worker's strict reader of an issued certificate (already JSON): the exact fields, for this
 * worker, a certificate over the key the worker sent. Refusals are `ContractError(call, rule)`.
 */
export function readIssuedCertificate(
  call: 'enroll' | 'certificate',
  json: unknown,
  workerId: string,
  privateKey: KeyObject,
): IssuedCertificateResponse {
  return refusing(call, () => {
    const a = readObject(json, '', ISSUED_FIELDS);
    if (readString(a.workerId, 'workerId', { max: 63, pattern: WORKER_ID_PATTERN }) !== workerId)
      throw new ValidationError('workerId', 'other_worker');
    const certificatePem = readString(a.certificatePem, 'certificatePem', PEM);
    readString(a.chainPem, 'chainPem', PEM);
    readString(a.fingerprint, 'fingerprint', { max: 64, pattern: HEX });
    readString(a.serial, 'serial', { max: 64, pattern: HEX });
    readString(a.notAfter, 'notAfter', { max: 24, pattern: ISO_TIME });
    let certificate: X509Certificate;
    try {
      certificate = new X509Certificate(certificatePem);
    } catch {
      throw new ValidationError('certificatePem', 'not_a_certificate');
    }
    if (!certificate.checkPrivateKey(privateKey)) throw new ValidationError('certificatePem', 'other_key');
    return a as unknown as IssuedCertificateResponse;
  });
}

/** The same reader on the answer's bytes (strict JSON, at most 64 KiB). */
export function parseIssuedCertificate(
  call: 'enroll' | 'certificate',
  bytes: string | Buffer,
  workerId: string,
  privateKey: KeyObject,
): IssuedCertificateResponse {
  return readIssuedCertificate(
    call,
    answerJson(call, bytes, ISSUED_CERTIFICATE_MAX_BYTES),
    workerId,
    privateKey,
  );
}
