import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The key of the last session call each worker's current session applied (R-WRK-7, ADR 0012): an
 * exact replay of it after a lost answer is answered instead of fenced. Null until the first call.
 */
export class SessionLastCall1764892800000 implements MigrationInterface {
  name = 'SessionLastCall1764892800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE workers ADD COLUMN last_call TEXT');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE workers DROP COLUMN last_call');
  }
}
