import type { QueryRunner } from 'typeorm';
import { DialectTypes, POSTGRES_TYPES, SQLITE_TYPES } from './activation-and-logs';

/** What this migration needs beyond the column types: the rows `(key, value)` of a worker's labels. */
export interface AdminViewsDialect extends DialectTypes {
  readonly labelsOf: (workersAlias: string) => string;
}
export const SQLITE_ADMIN: AdminViewsDialect = {
  ...SQLITE_TYPES,
  labelsOf: (w) => `json_each(${w}.capabilities_json, '$.labels')`,
};
export const POSTGRES_ADMIN: AdminViewsDialect = {
  ...POSTGRES_TYPES,
  labelsOf: (w) => `jsonb_each_text(${w}.capabilities_json::jsonb -> 'labels')`,
};

/**
 * The admin views of R-ADM-1: the session that held each attempt (backfilled from its newest lease),
 * a worker's labels as rows (the `label=key=value` filter is one indexed lookup on both dialects,
 * backfilled from the stored capabilities), and the indexes of the status and digest filters.
 */
export async function upAdminViews(q: QueryRunner, t: AdminViewsDialect): Promise<void> {
  await q.query(`ALTER TABLE attempts ADD COLUMN session_id ${t.uuid}`);
  await q.query(`UPDATE attempts SET session_id = (SELECT l.session_id FROM run_leases l
      WHERE l.attempt_id = attempts.id ORDER BY l.lease_generation DESC LIMIT 1)`);
  await q.query(`CREATE TABLE worker_labels (
      worker_id ${t.text} NOT NULL,
      key ${t.text} NOT NULL,
      value ${t.text} NOT NULL,
      PRIMARY KEY (worker_id, key)
    )${t.strict}`);
  await q.query(`CREATE INDEX worker_labels_match ON worker_labels (key, value, worker_id)`);
  await q.query(`INSERT INTO worker_labels (worker_id, key, value)
      SELECT w.worker_id, l.key, l.value FROM workers w, ${t.labelsOf('w')} l`);
  await q.query(`CREATE INDEX workers_status ON workers (status, worker_id)`);
  await q.query(`CREATE INDEX workers_capabilities_digest ON workers (capabilities_digest, worker_id)`);
}

export async function downAdminViews(q: QueryRunner): Promise<void> {
  for (const index of ['workers_capabilities_digest', 'workers_status']) await q.query(`DROP INDEX ${index}`);
  await q.query('DROP TABLE worker_labels');
  await q.query('ALTER TABLE attempts DROP COLUMN session_id');
}
