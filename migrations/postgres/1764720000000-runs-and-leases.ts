import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tasks and their immutable revisions, runs, attempts, run leases and the per-run event log
 * (postgres; times are timestamptz). `queue_order` is epoch ms in both dialects, so the queue's keyset is
 * plain integers. At most one active lease per attempt is enforced by a partial unique index.
 */
export class RunsAndLeases1764720000000 implements MigrationInterface {
  name = 'RunsAndLeases1764720000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE tasks (
        id uuid PRIMARY KEY NOT NULL,
        name text NOT NULL,
        revision integer NOT NULL CHECK (revision >= 1),
        digest text NOT NULL,
        spec_json text NOT NULL,
        cron text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        deleted_at timestamptz
      )`);
    await q.query(`CREATE UNIQUE INDEX tasks_name_live ON tasks (name) WHERE deleted_at IS NULL`);
    await q.query(`CREATE INDEX tasks_cron ON tasks (id) WHERE cron IS NOT NULL AND deleted_at IS NULL`);
    await q.query(`CREATE TABLE task_revisions (
        task_id uuid NOT NULL,
        revision integer NOT NULL,
        digest text NOT NULL,
        spec_json text NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (task_id, revision)
      )`);
    await q.query(`CREATE TABLE runs (
        id uuid PRIMARY KEY NOT NULL,
        task_id uuid NOT NULL,
        revision integer NOT NULL,
        spec_digest text NOT NULL,
        placement_json text NOT NULL,
        status text NOT NULL CHECK (status IN ('queued', 'dispatching', 'running', 'retry_wait', 'succeeded', 'failed', 'cancelled', 'timed_out', 'lost')),
        version bigint NOT NULL CHECK (version >= 0),
        event_seq bigint NOT NULL,
        priority integer NOT NULL,
        queue_order bigint NOT NULL,
        trigger_kind text NOT NULL CHECK (trigger_kind IN ('manual', 'cron')),
        idempotency_key text UNIQUE,
        idempotency_digest text,
        cron_key text UNIQUE,
        scheduled_at timestamptz,
        attempt_count integer NOT NULL,
        current_attempt_id uuid,
        cancel_requested boolean NOT NULL,
        next_attempt_at timestamptz,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        finished_at timestamptz
      )`);
    await q.query(`CREATE INDEX runs_queue ON runs (priority DESC, queue_order, id) WHERE status = 'queued'`);
    await q.query(`CREATE INDEX runs_retry_due ON runs (next_attempt_at) WHERE status = 'retry_wait'`);
    await q.query(`CREATE INDEX runs_task ON runs (task_id, id)`);
    await q.query(`CREATE TABLE attempts (
        id uuid PRIMARY KEY NOT NULL,
        run_id uuid NOT NULL,
        attempt_no integer NOT NULL CHECK (attempt_no >= 1),
        status text NOT NULL CHECK (status IN ('claimed', 'starting', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out', 'lost')),
        version bigint NOT NULL CHECK (version >= 0),
        worker_id text,
        lease_generation integer NOT NULL,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        finished_at timestamptz,
        UNIQUE (run_id, attempt_no)
      )`);
    await q.query(`CREATE TABLE run_leases (
        attempt_id uuid NOT NULL,
        lease_generation integer NOT NULL CHECK (lease_generation >= 1),
        offer_id uuid PRIMARY KEY NOT NULL,
        run_id uuid NOT NULL,
        worker_id text NOT NULL,
        session_id uuid NOT NULL,
        session_generation integer NOT NULL,
        version bigint NOT NULL CHECK (version >= 0),
        token_digest text NOT NULL,
        state text NOT NULL CHECK (state IN ('active', 'released', 'expired', 'completed')),
        expires_at timestamptz NOT NULL,
        claimed_at timestamptz NOT NULL,
        ended_at timestamptz
      )`);
    await q.query(
      `CREATE UNIQUE INDEX run_leases_one_live ON run_leases (attempt_id) WHERE state = 'active'`,
    );
    await q.query(`CREATE INDEX run_leases_expiry ON run_leases (expires_at) WHERE state = 'active'`);
    // Live leases per worker, kept under the worker's row lock: a claim checks capacity without counting rows.
    await q.query(
      `ALTER TABLE workers ADD COLUMN active_leases integer NOT NULL DEFAULT 0 CHECK (active_leases >= 0)`,
    );
    await q.query(`CREATE TABLE run_events (
        run_id uuid NOT NULL,
        seq bigint NOT NULL,
        type text NOT NULL,
        attempt_id uuid,
        at timestamptz NOT NULL,
        detail text,
        PRIMARY KEY (run_id, seq)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE workers DROP COLUMN active_leases');
    for (const table of ['run_events', 'run_leases', 'attempts', 'runs', 'task_revisions', 'tasks'])
      await q.query(`DROP TABLE ${table}`);
  }
}
