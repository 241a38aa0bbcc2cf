import {
  AuditEntry,
  IdGenerator,
  RenewalOutcome,
  RenewalRefusal,
  WorkerCertificateRecord,
  WorkerCertificateRepository,
  WorkerCertificateSigner,
} from '@ql/domain';
import { appendAudit } from './audit-sql';
import {
  CERTIFICATE_COLUMNS,
  CURRENT_CERTIFICATE,
  CertificateRow,
  recordIssuedCertificate,
  revokeIssuedCertificates,
  toCertificate,
} from './certificate-sql';
import { SqlDatabase, SqlExecutor } from './sql-executor';

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
      `SELECT ${CERTIFICATE_COLUMNS} FROM worker_certificates WHERE worker_id = :workerId AND ${CURRENT_CERTIFICATE}`,
      { workerId },
    );
    return row ? toCertificate(row) : null;
  }

  async listForWorker(workerId: string, limit: number): Promise<WorkerCertificateRecord[]> {
    const rows = await this.db.many<CertificateRow>(
      `SELECT ${CERTIFICATE_COLUMNS} FROM worker_certificates WHERE worker_id = :workerId
       ORDER BY issued_at DESC, fingerprint LIMIT :limit`,
      { workerId, limit },
    );
    return rows.map(toCertificate);
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
          `SELECT ${CERTIFICATE_COLUMNS} FROM worker_certificates
           WHERE renewed_from = :presented AND public_key_digest = :digest AND ${CURRENT_CERTIFICATE}`,
          { presented: input.presented, digest: input.publicKeyDigest },
        );
        return replay
          ? { kind: 'replayed', certificate: toCertificate(replay) }
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

async function findIn(tx: SqlExecutor, fingerprint: string): Promise<WorkerCertificateRecord | null> {
  const row = await tx.one<CertificateRow>(
    `SELECT ${CERTIFICATE_COLUMNS} FROM worker_certificates WHERE fingerprint = :fingerprint`,
    {
      fingerprint,
    },
  );
  return row ? toCertificate(row) : null;
}

async function currentIn(tx: SqlExecutor, workerId: string): Promise<string | null> {
  const row = await tx.one<{ fingerprint: string }>(
    `SELECT fingerprint FROM worker_certificates WHERE worker_id = :workerId AND ${CURRENT_CERTIFICATE}`,
    { workerId },
  );
  return row?.fingerprint ?? null;
}
