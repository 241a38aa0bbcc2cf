import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Workers and their sessions, API keys and the admin audit log (SQLite; times are epoch ms). */
export class Initial1764547200000 implements MigrationInterface {
  name = 'Initial1764547200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE workers (
      worker_id TEXT PRIMARY KEY NOT NULL,
      disabled INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
      session_id TEXT NOT NULL UNIQUE,
      generation INTEGER NOT NULL CHECK (generation >= 1),
      version INTEGER NOT NULL CHECK (version >= 0),
      status TEXT NOT NULL CHECK (status IN ('online', 'draining', 'offline')),
      lease_expires_at INTEGER NOT NULL,
      max_concurrent_runs INTEGER NOT NULL CHECK (max_concurrent_runs BETWEEN 1 AND 1024),
      available_slots INTEGER NOT NULL CHECK (available_slots BETWEEN 0 AND max_concurrent_runs),
      registration_digest TEXT NOT NULL,
      capabilities_json TEXT NOT NULL,
      capabilities_digest TEXT NOT NULL,
      software_version TEXT NOT NULL,
      protocol_version INTEGER NOT NULL,
      registered_at INTEGER NOT NULL,
      last_seen_at INTEGER NOT NULL,
      created_at INTEGER NOT NULL
    ) STRICT`);
    await q.query(`CREATE TABLE worker_sessions (
      session_id TEXT PRIMARY KEY NOT NULL,
      worker_id TEXT NOT NULL,
      generation INTEGER NOT NULL,
      started_at INTEGER NOT NULL,
      ended_at INTEGER,
      end_reason TEXT,
      UNIQUE (worker_id, generation)
    ) STRICT`);
    await q.query(`CREATE TABLE api_keys (
      id TEXT PRIMARY KEY NOT NULL,
      name TEXT NOT NULL,
      role TEXT NOT NULL CHECK (role IN ('viewer', 'admin')),
      digest TEXT NOT NULL UNIQUE,
      created_at INTEGER NOT NULL,
      revoked_at INTEGER
    ) STRICT`);
    await q.query(`CREATE TABLE audit_log (
      id TEXT PRIMARY KEY NOT NULL,
      at INTEGER NOT NULL,
      actor TEXT NOT NULL,
      action TEXT NOT NULL,
      target TEXT NOT NULL,
      detail TEXT
    ) STRICT`);
    await q.query(`CREATE INDEX audit_log_at ON audit_log (at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of ['audit_log', 'api_keys', 'worker_sessions', 'workers'])
      await q.query(`DROP TABLE ${table}`);
  }
}
