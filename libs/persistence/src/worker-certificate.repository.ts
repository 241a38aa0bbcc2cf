import {
  AuditEntry,
  IdGenerator,
  IssuedWorkerCertificate,
  RenewalOutcome,
  RenewalRefusal,
  WorkerCertificateRecord,
  WorkerCertificateRepository,
  WorkerCertificateSigner,
} from '@ql/domain';
import { appendAudit } from './audit.repository';
import { insertRevocation } from './certificate-revocation.repository';
import { SqlDatabase, SqlExecutor, SqlTransaction, toMs, toMsOrNull } from './sql-executor';

interface CertificateRow {
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

const COLUMNS =
  'fingerprint, worker_id, serial, public_key_digest, certificate_pem, issued_at, not_after, renewed_from, superseded_by, revoked_at';
const CURRENT = 'superseded_by IS NULL AND revoked_at IS NULL';

/**
 * Records a certificate just signed for its worker as the worker's current one, superseding the one
 * before (ADR 0045 §4), under the worker's lock. The enrollment route's transaction calls it after
 * consuming the token; `renew` below after its checks.
 */
export async function recordIssuedCertificate(
  tx: SqlTransaction,
  certificate: IssuedWorkerCertificate,
  renewedFrom: string | null,
): Promise<WorkerCertificateRecord> {
  await tx.lock(`worker:${certificate.workerId}`);
  await tx.run(
    `UPDATE worker_certificates SET superseded_by = :fingerprint WHERE worker_id = :workerId AND ${CURRENT}`,
    {
      fingerprint: certificate.fingerprint,
      workerId: certificate.workerId,
    },
  );
  const row = await tx.one<CertificateRow>(
    `INSERT INTO worker_certificates (${COLUMNS})
     VALUES (:fingerprint, :workerId, :serial, :publicKeyDigest, :certificatePem, {ms :issuedAt}, {ms :notAfter},
             :renewedFrom, NULL, NULL)
     RETURNING ${COLUMNS}`,
    { ...certificate, renewedFrom },
  );
  return toRecord(row!);
}

/** The certificates issued to workers: one current per worker, renewals, forks, revocation. */
export class SqlWorkerCertificateRepository implements WorkerCertificateRepository {
  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
  ) {}

  async find(fingerprint: string): Promise<WorkerCertificateRecord | null> {
    return findIn(this.db, fingerprint);
  }

  async current(workerId: string): Promise<WorkerCertificateRecord | null> {
    const row = await this.db.one<CertificateRow>(
      `SELECT ${COLUMNS} FROM worker_certificates WHERE worker_id = :workerId AND ${CURRENT}`,
      { workerId },
    );
    return row ? toRecord(row) : null;
  }

  async listForWorker(workerId: string, limit: number): Promise<WorkerCertificateRecord[]> {
    const rows = await this.db.many<CertificateRow>(
      `SELECT ${COLUMNS} FROM worker_certificates WHERE worker_id = :workerId
       ORDER BY issued_at DESC, fingerprint LIMIT :limit`,
      { workerId, limit },
    );
    return rows.map(toRecord);
  }

  async renew(
    input: { workerId: string; presented: string; publicKeyDigest: string },
    sign: WorkerCertificateSigner,
    audit: { renewed: AuditEntry; refused: (code: RenewalRefusal, current: string | null) => AuditEntry },
  ): Promise<RenewalOutcome> {
    return this.db.transaction(async (tx): Promise<RenewalOutcome> => {
      await tx.lock(`worker:${input.workerId}`);
      const presented = await findIn(tx, input.presented);
      const refuse = async (code: RenewalRefusal): Promise<RenewalOutcome> => {
        const current = code === 'certificate_superseded' ? await currentIn(tx, input.workerId) : null;
        await appendAudit(tx, this.ids, audit.refused(code, current));
        return { kind: 'refused', code, current };
      };
      // Only a certificate issued here, to this worker, renews: a hand-made one enrolls instead.
      if (!presented || presented.workerId !== input.workerId) return refuse('certificate_unknown');
      if (presented.revokedAt !== null) return refuse('certificate_revoked');
      if (presented.supersededBy !== null) {
        const replay = await tx.one<CertificateRow>(
          `SELECT ${COLUMNS} FROM worker_certificates
           WHERE renewed_from = :presented AND public_key_digest = :digest AND ${CURRENT}`,
          { presented: input.presented, digest: input.publicKeyDigest },
        );
        return replay
          ? { kind: 'replayed', certificate: toRecord(replay) }
          : refuse('certificate_superseded');
      }
      const signed = await sign();
      const certificate = await recordIssuedCertificate(tx, signed, input.presented);
      await appendAudit(tx, this.ids, audit.renewed);
      return { kind: 'renewed', certificate };
    });
  }

  async auditRefusal(audit: AuditEntry): Promise<void> {
    await appendAudit(this.db, this.ids, audit);
  }

  async revokeWorker(workerId: string, reason: string | null, audit: AuditEntry): Promise<string[]> {
    return this.db.transaction(async (tx) => {
      await tx.lock(`worker:${workerId}`);
      const revoked = await revokeIssuedCertificates(tx, workerId, reason);
      await appendAudit(tx, this.ids, { ...audit, detail: { ...audit.detail, fingerprints: revoked } });
      return revoked;
    });
  }
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

async function findIn(tx: SqlExecutor, fingerprint: string): Promise<WorkerCertificateRecord | null> {
  const row = await tx.one<CertificateRow>(
    `SELECT ${COLUMNS} FROM worker_certificates WHERE fingerprint = :fingerprint`,
    {
      fingerprint,
    },
  );
  return row ? toRecord(row) : null;
}

async function currentIn(tx: SqlExecutor, workerId: string): Promise<string | null> {
  const row = await tx.one<{ fingerprint: string }>(
    `SELECT fingerprint FROM worker_certificates WHERE worker_id = :workerId AND ${CURRENT}`,
    { workerId },
  );
  return row?.fingerprint ?? null;
}

function toRecord(row: CertificateRow): WorkerCertificateRecord {
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
