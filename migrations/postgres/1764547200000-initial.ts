import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Workers and their sessions, API keys and the admin audit log (PostgreSQL; times are timestamptz).
 * `workers` gets heartbeats all day: no index on the columns a heartbeat changes and free space in
 * each page (fillfactor 80) keep those updates HOT (no index writes).
 */
export class Initial1764547200000 implements MigrationInterface {
  name = 'Initial1764547200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE workers (
      worker_id text PRIMARY KEY,
      disabled boolean NOT NULL DEFAULT false,
      session_id uuid NOT NULL UNIQUE,
      generation integer NOT NULL CHECK (generation >= 1),
      version bigint NOT NULL CHECK (version >= 0),
      status text NOT NULL CHECK (status IN ('online', 'draining', 'offline')),
      lease_expires_at timestamptz NOT NULL,
      max_concurrent_runs integer NOT NULL CHECK (max_concurrent_runs BETWEEN 1 AND 1024),
      available_slots integer NOT NULL CHECK (available_slots BETWEEN 0 AND max_concurrent_runs),
      registration_digest text NOT NULL,
      capabilities_json text NOT NULL,
      capabilities_digest text NOT NULL,
      software_version text NOT NULL,
      protocol_version integer NOT NULL,
      registered_at timestamptz NOT NULL,
      last_seen_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL
    ) WITH (fillfactor = 80)`);
    await q.query(`CREATE TABLE worker_sessions (
      session_id uuid PRIMARY KEY,
      worker_id text NOT NULL,
      generation integer NOT NULL,
      started_at timestamptz NOT NULL,
      ended_at timestamptz,
      end_reason text,
      UNIQUE (worker_id, generation)
    )`);
    await q.query(`CREATE TABLE api_keys (
      id uuid PRIMARY KEY,
      name text NOT NULL,
      role text NOT NULL CHECK (role IN ('viewer', 'admin')),
      digest text NOT NULL UNIQUE,
      created_at timestamptz NOT NULL,
      revoked_at timestamptz
    )`);
    await q.query(`CREATE TABLE audit_log (
      id uuid PRIMARY KEY,
      at timestamptz NOT NULL,
      actor text NOT NULL,
      action text NOT NULL,
      target text NOT NULL,
      detail jsonb
    )`);
    await q.query(`CREATE INDEX audit_log_at ON audit_log (at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of ['audit_log', 'api_keys', 'worker_sessions', 'workers'])
      await q.query(`DROP TABLE ${table}`);
  }
}
