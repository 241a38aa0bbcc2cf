import { AuditEntry, CertificateRevocationRepository, IdGenerator, RevokedCertificate } from '@ql/domain';
import { appendAudit } from './audit-sql';
import { insertRevocation } from './certificate-sql';
import { SqlDatabase, toMs } from './sql-executor';

interface RevokedRow {
  fingerprint: string;
  revoked_at: number | Date;
  reason: string | null;
}

/** Insert-only: nothing deletes a row (revokedCount's promise, ADR 0022). */
export class SqlCertificateRevocationRepository implements CertificateRevocationRepository {
  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
  ) {}

  // Insert-if-absent; the first revocation time wins.
  async revoke(fingerprint: string, reason: string | null, audit: AuditEntry): Promise<RevokedCertificate> {
    return this.db.transaction(async (tx) => {
      await insertRevocation(tx, fingerprint, reason);
      const row = await tx.one<RevokedRow>(
        'SELECT fingerprint, revoked_at, reason FROM revoked_certificates WHERE fingerprint = :fingerprint',
        { fingerprint },
      );
      await appendAudit(tx, this.ids, audit);
      return toRevoked(row!);
    });
  }

  async lookUp(fingerprint: string): Promise<{ revoked: boolean; revokedCount: number }> {
    const row = await this.db.one<{ hit: number | null; n: number | string }>(
      `SELECT (SELECT 1 FROM revoked_certificates WHERE fingerprint = :fingerprint) AS hit,
              (SELECT COUNT(*) FROM revoked_certificates) AS n`,
      { fingerprint },
    );
    return { revoked: row!.hit !== null, revokedCount: Number(row!.n) };
  }

  async revokedCount(): Promise<number> {
    const row = await this.db.one<{ n: number | string }>('SELECT COUNT(*) AS n FROM revoked_certificates');
    return Number(row!.n);
  }

  async list(limit: number): Promise<RevokedCertificate[]> {
    const rows = await this.db.many<RevokedRow>(
      'SELECT fingerprint, revoked_at, reason FROM revoked_certificates ORDER BY revoked_at DESC, fingerprint LIMIT :limit',
      { limit },
    );
    return rows.map(toRevoked);
  }
}

function toRevoked(row: RevokedRow): RevokedCertificate {
  return { fingerprint: row.fingerprint, revokedAt: toMs(row.revoked_at), reason: row.reason };
}
