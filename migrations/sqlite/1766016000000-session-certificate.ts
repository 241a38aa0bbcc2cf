import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The fingerprint of the client certificate each session registered with (ADR 0045 §4), shown in the
 * worker's admin view. Null for sessions registered before this column.
 */
export class SessionCertificate1766016000000 implements MigrationInterface {
  name = 'SessionCertificate1766016000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE worker_sessions ADD COLUMN certificate_fingerprint TEXT');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE worker_sessions DROP COLUMN certificate_fingerprint');
  }
}
