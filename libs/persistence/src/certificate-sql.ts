import { IssuedWorkerCertificate, WorkerCertificateRecord } from '@ql/domain';
import { SqlExecutor, SqlTransaction, toMs, toMsOrNull } from './sql-executor';

/**
 * The rows of issued worker certificates and the revocation list, written inside other repositories'
 * transactions too: enrollment records a certificate, deleting or revoking a worker revokes its own.
 */

export interface CertificateRow {
  fingerprint: string;
  worker_id: string;
  serial: string;
  public_key_digest: string;
  certificate_pem: string;
  issued_at: number | Date;
  not_after: number | Date;
  renewed_from: string | null;
  superseded_by: string | null;
  revoked_at: number | Date | null;
}

export const CERTIFICATE_COLUMNS =
  'fingerprint, worker_id, serial, public_key_digest, certificate_pem, issued_at, not_after, renewed_from, superseded_by, revoked_at';
export const CURRENT_CERTIFICATE = 'superseded_by IS NULL AND revoked_at IS NULL';

/**
 * Records a certificate just signed for its worker as the worker's current one, superseding the one
 * before (ADR 0045 §4), under the worker's lock. The enrollment route's transaction calls it after
 * consuming the token; the certificate repository's `renew` after its checks.
 */
export async function recordIssuedCertificate(
  tx: SqlTransaction,
  certificate: IssuedWorkerCertificate,
  renewedFrom: string | null,
): Promise<WorkerCertificateRecord> {
  await tx.lock(`worker:${certificate.workerId}`);
  await tx.run(
    `UPDATE worker_certificates SET superseded_by = :fingerprint WHERE worker_id = :workerId AND ${CURRENT_CERTIFICATE}`,
    {
      fingerprint: certificate.fingerprint,
      workerId: certificate.workerId,
    },
  );
  const row = await tx.one<CertificateRow>(
    `INSERT INTO worker_certificates (${CERTIFICATE_COLUMNS})
     VALUES (:fingerprint, :workerId, :serial, :publicKeyDigest, :certificatePem, {ms :issuedAt}, {ms :notAfter},
             :renewedFrom, NULL, NULL)
     RETURNING ${CERTIFICATE_COLUMNS}`,
    { ...certificate, renewedFrom },
  );
  return toCertificate(row!);
}

/**
 * Revokes every certificate issued to the worker and not yet revoked: `revoked_at`, and each
 * fingerprint into the revocation list the identity guard reads, so every replica refuses them
 * within QL_REVOCATION_CACHE_MS (ADR 0022). Under the caller's `worker:<id>` lock. Revoking a worker
 * (ADR 0045 §6) and deleting one both call it: a deleted worker enrolls again.
 */
export async function revokeIssuedCertificates(
  tx: SqlExecutor,
  workerId: string,
  reason: string | null,
): Promise<string[]> {
  const rows = await tx.many<{ fingerprint: string }>(
    `UPDATE worker_certificates SET revoked_at = {now} WHERE worker_id = :workerId AND revoked_at IS NULL
     RETURNING fingerprint`,
    { workerId },
  );
  const fingerprints = rows.map((r) => r.fingerprint).sort();
  for (const fingerprint of fingerprints) await insertRevocation(tx, fingerprint, reason);
  return fingerprints;
}

/** Revokes a fingerprint if it is not already; the first revocation time wins. */
export async function insertRevocation(
  tx: SqlExecutor,
  fingerprint: string,
  reason: string | null,
): Promise<void> {
  await tx.run(
    `INSERT INTO revoked_certificates (fingerprint, revoked_at, reason) VALUES (:fingerprint, {now}, :reason)
     ON CONFLICT (fingerprint) DO NOTHING`,
    { fingerprint, reason },
  );
}

export function toCertificate(row: CertificateRow): WorkerCertificateRecord {
  return {
    fingerprint: row.fingerprint,
    workerId: row.worker_id,
    serial: row.serial,
    publicKeyDigest: row.public_key_digest,
    certificatePem: row.certificate_pem,
    issuedAt: toMs(row.issued_at),
    notAfter: toMs(row.not_after),
    renewedFrom: row.renewed_from,
    supersededBy: row.superseded_by,
    revokedAt: toMsOrNull(row.revoked_at),
  };
}
