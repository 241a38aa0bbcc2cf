import type { QueryRunner } from 'typeorm';
import { DialectTypes } from './activation-and-logs';

/**
 * Script bundles (issue 19, ADR 0051): content-addressed `.tar.gz` bytes in the database on both
 * dialects (`BLOB` / `bytea`), and the digest a task and each of its revisions pin, indexed so a
 * delete can ask "who pins it" without reading a spec.
 */
export async function upBundles(q: QueryRunner, t: DialectTypes, blob: string): Promise<void> {
  await q.query(`CREATE TABLE bundles (
      digest ${t.text} PRIMARY KEY NOT NULL CHECK (length(digest) = 64),
      size_bytes ${t.bigint} NOT NULL CHECK (size_bytes >= 0),
      files ${t.int} NOT NULL CHECK (files >= 1),
      unpacked_bytes ${t.bigint} NOT NULL CHECK (unpacked_bytes >= 0),
      content ${blob} NOT NULL,
      created_by ${t.text} NOT NULL,
      created_at ${t.time} NOT NULL
    )${t.strict}`);
  await q.query(`ALTER TABLE tasks ADD COLUMN bundle_digest ${t.text}`);
  await q.query(`ALTER TABLE task_revisions ADD COLUMN bundle_digest ${t.text}`);
  await q.query(
    `CREATE INDEX tasks_bundle ON tasks (bundle_digest) WHERE bundle_digest IS NOT NULL AND deleted_at IS NULL`,
  );
  await q.query(
    `CREATE INDEX task_revisions_bundle ON task_revisions (bundle_digest, task_id, revision) WHERE bundle_digest IS NOT NULL`,
  );
}

export async function downBundles(q: QueryRunner): Promise<void> {
  await q.query('DROP INDEX task_revisions_bundle');
  await q.query('DROP INDEX tasks_bundle');
  await q.query('ALTER TABLE task_revisions DROP COLUMN bundle_digest');
  await q.query('ALTER TABLE tasks DROP COLUMN bundle_digest');
  await q.query('DROP TABLE bundles');
}
