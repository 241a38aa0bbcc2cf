import type { MigrationInterface, QueryRunner } from 'typeorm';
import { LeaseSteps1765152000000 } from './1765152000000-lease-steps';

/**
 * ADR 0047: \`ql_lease_step\` (ADR 0017) also applies a \`completion\` that carries \`executorHandle\` on
 * an attempt still \`starting\` — \`running\` with that handle and the completion, in one statement as
 * the repository's transaction writes them: the running slot gets the digest \`running\` would have
 * had (\`runningDigest\`), the attempt and the run move twice (versions, \`callback_seq\`), and
 * \`attempt.running\`, \`run.running\` come before the finish events. Once \`running\` with the same handle
 * is recorded, such a completion is applied as any other. Every other case still returns no row and
 * is answered by the explaining path. The signature is unchanged (\`p_executor_handle\` was \`running\`'s
 * only): replicas of the previous version keep calling it during a rolling upgrade and get what they
 * got (they send no handle on a completion).
 */
const LEASE_STEP = `
CREATE OR REPLACE FUNCTION ql_lease_step(
  p_step text, p_offer_id uuid, p_worker_id text, p_session_id uuid, p_generation integer,
  p_expected_version bigint, p_digest text, p_lease_generation integer, p_lease_version bigint,
  p_ack text, p_executor_handle text, p_error_code text, p_outcome text, p_exit_code integer,
  p_error_summary text, p_now timestamptz)
RETURNS TABLE (lease run_leases, run runs, attempt attempts)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
  l run_leases;
  w workers;
  r runs;
  a attempts;
  checked timestamptz;
  at timestamptz;
  ends boolean := p_step IN ('start_failure', 'completion');
  successor boolean;
  applies boolean;
  -- ADR 0047: a completion that carries the handle stands in for \`running\` too; this is the digest
  -- that \`running\` has (runningDigest: 'ql-ack:' and the canonical JSON of {executorHandle, step}).
  run_ack text := CASE WHEN p_step = 'completion' AND p_executor_handle IS NOT NULL THEN
    encode(sha256(convert_to('ql-ack:{"executorHandle":' || to_json(p_executor_handle)::text
      || ',"step":"running"}', 'UTF8')), 'hex') END;
  with_running boolean := false;
  acks integer := 1;
  spec jsonb;
  end_status text;
  run_to text;
  backoff bigint;
  detail text;
  events text[];
  details text[];
  attempt_ids uuid[];
BEGIN
  SELECT * INTO l FROM run_leases WHERE offer_id = p_offer_id FOR UPDATE;
  IF NOT FOUND THEN RETURN; END IF;
  checked := coalesce(p_now, clock_timestamp());
  -- The session fence (R-REG-5), read after the lease lock.
  SELECT * INTO w FROM workers WHERE worker_id = p_worker_id;
  IF NOT FOUND OR w.disabled OR w.session_id <> p_session_id OR w.generation <> p_generation
     OR w.status = 'offline' OR w.lease_expires_at <= checked OR w.version <> p_expected_version THEN
    RETURN;
  END IF;
  -- Whose lease: the holder, or (final steps) the worker's successor session with the token (ADR 0015).
  successor := ends AND l.worker_id = p_worker_id AND l.session_id <> p_session_id
    AND l.token_digest = p_digest;
  IF NOT successor AND (l.worker_id <> p_worker_id OR l.session_id <> p_session_id
      OR l.token_digest <> p_digest) THEN
    RETURN;
  END IF;
  IF l.lease_generation <> p_lease_generation THEN RETURN; END IF;
  -- The lease term: active, unexpired, the caller's version or one renewal behind it.
  IF l.state <> 'active' OR l.expires_at <= checked
     OR NOT (successor OR l.version = p_lease_version OR l.version = p_lease_version + 1) THEN
    RETURN;
  END IF;
  SELECT * INTO r FROM runs WHERE id = l.run_id FOR UPDATE;
  IF NOT FOUND THEN RETURN; END IF;
  SELECT * INTO a FROM attempts WHERE id = l.attempt_id;
  IF NOT FOUND OR a.lease_generation <> l.lease_generation THEN RETURN; END IF;
  -- Applied only from the state before the step, with its slot unrecorded; the run may take the move.
  applies := CASE p_step
      WHEN 'starting' THEN a.status = 'claimed' AND a.ack_starting IS NULL
      WHEN 'running' THEN a.status = 'starting' AND a.ack_running IS NULL
        AND r.status IN ('dispatching', 'running')
      WHEN 'start_failure' THEN a.status = 'starting' AND a.ack_final IS NULL
        AND r.status IN ('dispatching', 'running')
      WHEN 'completion' THEN a.ack_final IS NULL AND r.status IN ('dispatching', 'running')
        AND ((a.status = 'running' AND (run_ack IS NULL OR a.ack_running = run_ack))
          OR (a.status = 'starting' AND run_ack IS NOT NULL AND a.ack_running IS NULL))
      ELSE false END;
  IF NOT applies THEN RETURN; END IF;
  with_running := p_step = 'completion' AND a.status = 'starting';
  IF with_running THEN acks := 2; END IF;
  SELECT spec_json::jsonb INTO spec FROM task_revisions WHERE task_id = r.task_id AND revision = r.revision;
  IF NOT FOUND OR (p_step = 'starting' AND jsonb_typeof(spec->'timeoutMs') IS DISTINCT FROM 'number') THEN
    RETURN;
  END IF;
  at := coalesce(p_now, clock_timestamp());

  IF p_step = 'starting' THEN
    UPDATE attempts SET status = 'starting', version = version + 1, updated_at = at,
        started_at = at, deadline_at = at + (spec->>'timeoutMs')::int8 * interval '1 millisecond',
        ack_starting = p_ack, callback_seq = callback_seq + 1
      WHERE id = a.id RETURNING * INTO a;
    run_to := r.status;
    events := ARRAY['attempt.starting'];
    details := ARRAY['{"timeoutMs":' || ((spec->>'timeoutMs')::int8)::text || '}'];
    attempt_ids := ARRAY[a.id];
  ELSIF p_step = 'running' THEN
    UPDATE attempts SET status = 'running', version = version + 1, updated_at = at,
        executor_handle = p_executor_handle, ack_running = p_ack, callback_seq = callback_seq + 1
      WHERE id = a.id RETURNING * INTO a;
    run_to := 'running';
    events := ARRAY['attempt.running', 'run.running'];
    details := ARRAY[NULL, NULL];
    attempt_ids := ARRAY[a.id, NULL];
  ELSE
    end_status := CASE WHEN r.cancel_requested THEN 'cancelled'
      WHEN p_step = 'completion' THEN p_outcome
      WHEN a.deadline_at IS NOT NULL AND a.deadline_at <= checked THEN 'timed_out' ELSE 'failed' END;
    -- R-RUN-4 (decideRunAfterAttempt): cancellation wins, success finishes, a failure retries while
    -- the pinned revision's policy has attempts left.
    run_to := CASE WHEN end_status = 'cancelled' THEN 'cancelled'
      WHEN end_status = 'succeeded' THEN 'succeeded'
      WHEN jsonb_typeof(spec->'retry') IS DISTINCT FROM 'object' THEN end_status
      WHEN a.attempt_no >= (spec->'retry'->>'maxAttempts')::int THEN end_status
      ELSE 'retry_wait' END;
    IF run_to = 'retry_wait' THEN
      -- retryBackoffMs: initial × multiplier^(n − 2) before attempt n, capped; integers, so exact.
      backoff := least((spec->'retry'->>'maxBackoffMs')::numeric,
        (spec->'retry'->>'initialBackoffMs')::numeric
          * power((spec->'retry'->>'multiplier')::numeric, greatest(0, a.attempt_no - 1)))::int8;
      IF backoff IS NULL OR (spec->'retry'->>'maxBackoffMs') IS NULL THEN RETURN; END IF;
    END IF;
    -- Nothing was written before this line: every miss above is answered by the explaining path.
    IF p_step = 'start_failure' THEN
      detail := '{"status":' || to_json(end_status)::text || ',"errorCode":' || to_json(p_error_code)::text || '}';
      UPDATE attempts SET status = end_status, version = version + 1, updated_at = at, finished_at = at,
          error_code = p_error_code, ack_final = p_ack, callback_seq = callback_seq + 1
        WHERE id = a.id RETURNING * INTO a;
    ELSE
      detail := '{"status":' || to_json(end_status)::text || ',"reported":' || to_json(p_outcome)::text
        || ',"exitCode":' || coalesce(p_exit_code::text, 'null') || '}';
      -- With the handle on a starting attempt, \`running\` too, as its step would have written it (ADR 0047).
      UPDATE attempts SET status = end_status, version = version + acks, updated_at = at, finished_at = at,
          executor_handle = CASE WHEN with_running THEN p_executor_handle ELSE executor_handle END,
          ack_running = CASE WHEN with_running THEN run_ack ELSE ack_running END,
          exit_code = p_exit_code, error_summary = p_error_summary, ack_final = p_ack,
          callback_seq = callback_seq + acks
        WHERE id = a.id RETURNING * INTO a;
    END IF;
    -- The lease ends and its slot comes back to the session that held it (ADR 0010).
    UPDATE run_leases SET state = 'completed', version = version + 1, expires_at = at, ended_at = at
      WHERE offer_id = l.offer_id RETURNING * INTO l;
    UPDATE workers SET active_leases = active_leases - 1
      WHERE worker_id = l.worker_id AND session_id = l.session_id;
    events := ARRAY['attempt.finished', CASE WHEN run_to = 'retry_wait' THEN 'run.retry_scheduled'
      ELSE 'run.finished' END];
    details := ARRAY[detail, CASE WHEN run_to = 'retry_wait'
      THEN '{"nextAttemptNo":' || (a.attempt_no + 1)::text || ',"backoffMs":' || backoff::text || '}'
      ELSE '{"status":' || to_json(run_to)::text || '}' END];
    attempt_ids := ARRAY[a.id, NULL];
    IF with_running THEN
      events := ARRAY['attempt.running', 'run.running'] || events;
      details := ARRAY[NULL, NULL]::text[] || details;
      attempt_ids := ARRAY[a.id, NULL] || attempt_ids;
    END IF;
  END IF;

  UPDATE runs SET status = run_to, version = version + acks,
      event_seq = event_seq + cardinality(events), updated_at = at,
      finished_at = CASE WHEN run_to <> r.status
        AND run_to IN ('succeeded', 'failed', 'cancelled', 'timed_out', 'lost') THEN at ELSE finished_at END,
      next_attempt_at = CASE WHEN run_to = 'retry_wait'
        THEN at + backoff * interval '1 millisecond' ELSE next_attempt_at END
    WHERE id = r.id RETURNING * INTO r;
  INSERT INTO run_events (run_id, seq, type, attempt_id, at, detail)
    SELECT r.id, r.event_seq - cardinality(events) + e.n, e.type, attempt_ids[e.n], at, details[e.n]
    FROM unnest(events) WITH ORDINALITY AS e(type, n);
  lease := l;
  run := r;
  attempt := a;
  RETURN NEXT;
END
$fn$`;

export class LeaseStepFastCompletion1765843200000 implements MigrationInterface {
  name = 'LeaseStepFastCompletion1765843200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(LEASE_STEP);
  }

  /** The function as LeaseSteps1765152000000 made it. */
  async down(q: QueryRunner): Promise<void> {
    const replace = {
      query: (sql: string) => q.query(sql.replace('CREATE FUNCTION', 'CREATE OR REPLACE FUNCTION')),
    };
    await new LeaseSteps1765152000000().up(replace as unknown as QueryRunner);
  }
}
