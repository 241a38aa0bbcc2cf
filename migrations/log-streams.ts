import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * ADR 0032: the stream each stored chunk of output came from (`stdout`, `stderr`, or `system` for a
 * truncation marker). Rows stored before stay NULL (the admin views say `unknown`): nothing is
 * rewritten, and the text itself stays as stored (the views neutralize it on read). The statement is
 * the same on both dialects, so one class serves both lists.
 */
export async function upLogStreams(q: QueryRunner): Promise<void> {
  await q.query(
    `ALTER TABLE run_logs ADD COLUMN stream TEXT CHECK (stream IN ('stdout', 'stderr', 'system'))`,
  );
}

export async function downLogStreams(q: QueryRunner): Promise<void> {
  await q.query('ALTER TABLE run_logs DROP COLUMN stream');
}

export class LogStreams1765497600000 implements MigrationInterface {
  name = 'LogStreams1765497600000';

  async up(q: QueryRunner): Promise<void> {
    await upLogStreams(q);
  }

  async down(q: QueryRunner): Promise<void> {
    await downLogStreams(q);
  }
}
