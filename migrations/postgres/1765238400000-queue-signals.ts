import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Queue signals for long-poll offers (ADR 0019): every run that becomes `queued` (inserted, retried,
 * requeued, released) and every change of a worker's session (status, replaced session, disabled)
 * `NOTIFY`s channel `ql_queue` at commit, whichever replica or code path wrote it. Payloads differ
 * per row (`r:<run id>`, `w:<worker id>`), so PostgreSQL does not fold several into one.
 */
export class QueueSignals1765238400000 implements MigrationInterface {
  name = 'QueueSignals1765238400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE FUNCTION ql_signal_run_queued() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('ql_queue', 'r:' || NEW.id); RETURN NULL; END $$`);
    await q.query(`CREATE TRIGGER runs_queued_insert AFTER INSERT ON runs FOR EACH ROW
      WHEN (NEW.status = 'queued') EXECUTE FUNCTION ql_signal_run_queued()`);
    await q.query(`CREATE TRIGGER runs_queued_update AFTER UPDATE OF status ON runs FOR EACH ROW
      WHEN (NEW.status = 'queued' AND OLD.status <> 'queued') EXECUTE FUNCTION ql_signal_run_queued()`);
    await q.query(`CREATE FUNCTION ql_signal_session_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('ql_queue', 'w:' || NEW.worker_id); RETURN NULL; END $$`);
    await q.query(`CREATE TRIGGER workers_session_changed AFTER UPDATE OF status, session_id, disabled ON workers
      FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.session_id IS DISTINCT FROM NEW.session_id
        OR OLD.disabled IS DISTINCT FROM NEW.disabled)
      EXECUTE FUNCTION ql_signal_session_changed()`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TRIGGER workers_session_changed ON workers');
    await q.query('DROP FUNCTION ql_signal_session_changed()');
    await q.query('DROP TRIGGER runs_queued_update ON runs');
    await q.query('DROP TRIGGER runs_queued_insert ON runs');
    await q.query('DROP FUNCTION ql_signal_run_queued()');
  }
}
