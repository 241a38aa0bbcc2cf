import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Revoked worker certificates by SHA-256 fingerprint (R-ID-4). */
export class RevokedCertificates1764633600000 implements MigrationInterface {
  name = 'RevokedCertificates1764633600000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE revoked_certificates (
      fingerprint text PRIMARY KEY,
      revoked_at timestamptz NOT NULL,
      reason text
    )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE revoked_certificates');
  }
}
