import type { QueryRunner } from 'typeorm';

/**
 * ADR 0032: the stream each stored chunk of output came from (`stdout`, `stderr`, or `system` for a
 * truncation marker). Rows stored before stay NULL (the admin views say `unknown`): nothing is
 * rewritten, and the text itself stays as stored (the views neutralize it on read). Same statement on
 * both dialects.
 */
export async function upLogStreams(q: QueryRunner): Promise<void> {
  await q.query(
    `ALTER TABLE run_logs ADD COLUMN stream TEXT CHECK (stream IN ('stdout', 'stderr', 'system'))`,
  );
}

export async function downLogStreams(q: QueryRunner): Promise<void> {
  await q.query('ALTER TABLE run_logs DROP COLUMN stream');
}
