import type { AuditEntry } from './ports';

/**
 * Certificates the control plane issued to workers (ADR 0045 §4): one **current** certificate per
 * worker; renewing supersedes the one presented; revoking a worker revokes every one it was issued.
 * Fingerprints are SHA-256 of the DER, lower-case hex without colons (as the identity guard reads them).
 */
export interface IssuedWorkerCertificate {
  readonly fingerprint: string;
  readonly workerId: string;
  /** Lower-case hex. */
  readonly serial: string;
  /** SHA-256 of the certificate's SubjectPublicKeyInfo (DER), hex: a re-sent CSR is known by it. */
  readonly publicKeyDigest: string;
  /** The certificate alone, PEM (its chain is the issuer's). */
  readonly certificatePem: string;
  readonly issuedAt: number;
  readonly notAfter: number;
}

export interface WorkerCertificateRecord extends IssuedWorkerCertificate {
  /** The certificate presented to renew into this one; null for an enrollment. */
  readonly renewedFrom: string | null;
  /** The certificate that replaced this one (a renewal or a new enrollment), else null. */
  readonly supersededBy: string | null;
  readonly revokedAt: number | null;
}

/**
 * Signs the certificate to record. Called inside the transaction that records it, after every check
 * passed: when it throws, nothing of the request is written (a token stays unused).
 */
export type WorkerCertificateSigner = () => Promise<IssuedWorkerCertificate>;

/** Why a renewal is refused (ADR 0045 §3, §4). */
export type RenewalRefusal = 'certificate_superseded' | 'certificate_revoked' | 'certificate_unknown';

export type RenewalOutcome =
  | { readonly kind: 'renewed'; readonly certificate: WorkerCertificateRecord }
  /** The same public key again with the same presented certificate: a crash during renewal, not a fork. */
  | { readonly kind: 'replayed'; readonly certificate: WorkerCertificateRecord }
  | {
      readonly kind: 'refused';
      readonly code: RenewalRefusal;
      /** For `certificate_superseded`: the worker's current certificate, which the fork audit names. */
      readonly current: string | null;
    };

export interface WorkerCertificateRepository {
  find(fingerprint: string): Promise<WorkerCertificateRecord | null>;
  /** The worker's current certificate: neither superseded nor revoked. */
  current(workerId: string): Promise<WorkerCertificateRecord | null>;
  /** Newest first, at most `limit`. */
  listForWorker(workerId: string, limit: number): Promise<WorkerCertificateRecord[]>;
  /**
   * Renews with the presented certificate (`presented`, its fingerprint) in one transaction under the
   * worker's lock: the presented one must be the worker's current certificate, which the new one
   * supersedes. A presented certificate that was already renewed into a certificate for
   * `publicKeyDigest` answers that one (a replay). `refusalAudit` is written, alone, with a refusal.
   */
  renew(
    input: { readonly workerId: string; readonly presented: string; readonly publicKeyDigest: string },
    sign: WorkerCertificateSigner,
    audit: {
      readonly renewed: AuditEntry;
      readonly refused: (outcome: RenewalRefusal, current: string | null) => AuditEntry;
    },
  ): Promise<RenewalOutcome>;
  /**
   * Revokes every certificate issued to the worker (revoked_at, and each fingerprint into the
   * revocation list the identity guard reads): returns the fingerprints revoked by this call.
   */
  revokeWorker(workerId: string, reason: string | null, audit: AuditEntry): Promise<string[]>;
  /** A refusal decided before any of the above (a CSR, a disabled worker): its audit row alone. */
  auditRefusal(audit: AuditEntry): Promise<void>;
}
export const WORKER_CERTIFICATE_REPOSITORY = Symbol('WorkerCertificateRepository');
