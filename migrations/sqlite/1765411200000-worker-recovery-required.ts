import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * How many journal records of a worker wait for an operator (`recovery_required`), as its current
 * session's last heartbeat said (ADR 0029); 0 until a heartbeat says otherwise, and again after each
 * registration. Shown in the admin worker view and in /metrics.
 */
export class WorkerRecoveryRequired1765411200000 implements MigrationInterface {
  name = 'WorkerRecoveryRequired1765411200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE workers ADD COLUMN recovery_required integer NOT NULL DEFAULT 0');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE workers DROP COLUMN recovery_required');
  }
}
