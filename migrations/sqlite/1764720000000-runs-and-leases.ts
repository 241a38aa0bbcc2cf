import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tasks and their immutable revisions, runs, attempts, run leases and the per-run event log
 * (sqlite; times are epoch ms). `queue_order` is epoch ms in both dialects, so the queue's keyset is
 * plain integers. At most one active lease per attempt is enforced by a partial unique index.
 */
export class RunsAndLeases1764720000000 implements MigrationInterface {
  name = 'RunsAndLeases1764720000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE tasks (
        id TEXT PRIMARY KEY NOT NULL,
        name TEXT NOT NULL,
        revision INTEGER NOT NULL CHECK (revision >= 1),
        digest TEXT NOT NULL,
        spec_json TEXT NOT NULL,
        cron TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        deleted_at INTEGER
      ) STRICT`);
    await q.query(`CREATE UNIQUE INDEX tasks_name_live ON tasks (name) WHERE deleted_at IS NULL`);
    await q.query(`CREATE INDEX tasks_cron ON tasks (id) WHERE cron IS NOT NULL AND deleted_at IS NULL`);
    await q.query(`CREATE TABLE task_revisions (
        task_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        digest TEXT NOT NULL,
        spec_json TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (task_id, revision)
      ) STRICT`);
    await q.query(`CREATE TABLE runs (
        id TEXT PRIMARY KEY NOT NULL,
        task_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        spec_digest TEXT NOT NULL,
        placement_json TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('queued', 'dispatching', 'running', 'retry_wait', 'succeeded', 'failed', 'cancelled', 'timed_out', 'lost')),
        version INTEGER NOT NULL CHECK (version >= 0),
        event_seq INTEGER NOT NULL,
        priority INTEGER NOT NULL,
        queue_order INTEGER NOT NULL,
        trigger_kind TEXT NOT NULL CHECK (trigger_kind IN ('manual', 'cron')),
        idempotency_key TEXT UNIQUE,
        idempotency_digest TEXT,
        cron_key TEXT UNIQUE,
        scheduled_at INTEGER,
        attempt_count INTEGER NOT NULL,
        current_attempt_id TEXT,
        cancel_requested INTEGER NOT NULL,
        next_attempt_at INTEGER,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        finished_at INTEGER
      ) STRICT`);
    await q.query(`CREATE INDEX runs_queue ON runs (priority DESC, queue_order, id) WHERE status = 'queued'`);
    await q.query(`CREATE INDEX runs_retry_due ON runs (next_attempt_at) WHERE status = 'retry_wait'`);
    await q.query(`CREATE INDEX runs_task ON runs (task_id, id)`);
    await q.query(`CREATE TABLE attempts (
        id TEXT PRIMARY KEY NOT NULL,
        run_id TEXT NOT NULL,
        attempt_no INTEGER NOT NULL CHECK (attempt_no >= 1),
        status TEXT NOT NULL CHECK (status IN ('claimed', 'starting', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out', 'lost')),
        version INTEGER NOT NULL CHECK (version >= 0),
        worker_id TEXT,
        lease_generation INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        finished_at INTEGER,
        UNIQUE (run_id, attempt_no)
      ) STRICT`);
    await q.query(`CREATE TABLE run_leases (
        attempt_id TEXT NOT NULL,
        lease_generation INTEGER NOT NULL CHECK (lease_generation >= 1),
        offer_id TEXT PRIMARY KEY NOT NULL,
        run_id TEXT NOT NULL,
        worker_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        session_generation INTEGER NOT NULL,
        version INTEGER NOT NULL CHECK (version >= 0),
        token_digest TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('active', 'released', 'expired', 'completed')),
        expires_at INTEGER NOT NULL,
        claimed_at INTEGER NOT NULL,
        ended_at INTEGER
      ) STRICT`);
    await q.query(
      `CREATE UNIQUE INDEX run_leases_one_live ON run_leases (attempt_id) WHERE state = 'active'`,
    );
    await q.query(`CREATE INDEX run_leases_expiry ON run_leases (expires_at) WHERE state = 'active'`);
    // Live leases per worker, kept under the worker's row lock: a claim checks capacity without counting rows.
    await q.query(
      `ALTER TABLE workers ADD COLUMN active_leases INTEGER NOT NULL DEFAULT 0 CHECK (active_leases >= 0)`,
    );
    await q.query(`CREATE TABLE run_events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        attempt_id TEXT,
        at INTEGER NOT NULL,
        detail TEXT,
        PRIMARY KEY (run_id, seq)
      ) STRICT`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE workers DROP COLUMN active_leases');
    for (const table of ['run_events', 'run_leases', 'attempts', 'runs', 'task_revisions', 'tasks'])
      await q.query(`DROP TABLE ${table}`);
  }
}
