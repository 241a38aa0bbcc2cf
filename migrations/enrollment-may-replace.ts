import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Issue 27 item 10: a pattern token enrolls only ids without a current certificate or live session,
 * unless made with `mayReplace`. Existing tokens keep the safe default. `ADD COLUMN … DEFAULT` reads
 * the same on both dialects (SQLite stores the flag as 0/1, PostgreSQL as a boolean).
 */
function migration(flag: string) {
  return class implements MigrationInterface {
    name = 'EnrollmentMayReplace1766880000000';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`ALTER TABLE enrollment_tokens ADD COLUMN may_replace ${flag}`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query('ALTER TABLE enrollment_tokens DROP COLUMN may_replace');
    }
  };
}

export const SqliteEnrollmentMayReplace1766880000000 = migration('INTEGER NOT NULL DEFAULT 0');
export const PostgresEnrollmentMayReplace1766880000000 = migration('boolean NOT NULL DEFAULT false');
