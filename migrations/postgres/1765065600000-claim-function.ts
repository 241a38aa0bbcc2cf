import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * ADR 0016: the PostgreSQL claim in one statement, `ql_claim(…)`. It takes the first queued run that
 * is not locked by another claim (SKIP LOCKED) and, when the caller's replica already knows that the
 * run's placement matches the puller (by `md5(placement_json)`) and no preference hold is open for it,
 * reserves the slot with the session fence compare-and-set, writes the attempt, the lease, the run
 * move and its two events, and returns the offer; one round trip and one commit. Anything it cannot
 * decide (capabilities or placement not known to the replica, an open preference hold, a head the
 * puller does not match) it returns without writing, and the repository decides it as before.
 */
export const CLAIM_FUNCTION_SIGNATURE = `ql_claim(text, uuid, integer, bigint, text, uuid, uuid, text, bigint,
  text, text, text, text, text, bigint, bigint)`;

const CLAIM_FUNCTION = `CREATE FUNCTION ql_claim(
    p_worker_id text, p_session_id uuid, p_generation integer, p_expected_version bigint,
    p_caps_digest text, p_offer_id uuid, p_attempt_id uuid, p_token_digest text, p_lease_ms bigint,
    p_match text, p_holdable text, p_nomatch text, p_free text, p_skip text,
    p_hold_ms bigint, p_clock bigint)
  RETURNS TABLE (kind text, reason text, active_leases integer, capacity integer, scanned integer,
    caps_digest text, caps_json text, run_id uuid, task_id uuid, revision integer, spec_digest text,
    placement_digest text, placement_json text, queue_order bigint, now_ms bigint,
    attempt_id uuid, attempt_no integer, lease_generation integer, expires_at timestamptz,
    claimed_at timestamptz)
  LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
  v_now timestamptz := CASE WHEN p_clock IS NULL THEN clock_timestamp() ELSE to_timestamp(p_clock::float8 / 1000) END;
  v_now_ms bigint := CASE WHEN p_clock IS NULL THEN (extract(epoch from v_now) * 1000)::int8 ELSE p_clock END;
  v_skip uuid[] := string_to_array(coalesce(p_skip, ''), ',')::uuid[];
  v_held integer := cardinality(v_skip);
  v_w record;
  v_r record;
  v_pd text;
  v_attempt uuid;
  v_no integer;
  v_gen integer;
  v_seq bigint;
  v_expires timestamptz;
  v_claimed timestamptz;
BEGIN
  -- The session fence, state and capacity as the reservation checks them (read without a lock: the
  -- reservation below re-checks all of it under the worker's row lock). A miss is explained by the caller.
  SELECT w.capabilities_digest, w.active_leases, w.max_concurrent_runs, w.available_slots INTO v_w
    FROM workers w
   WHERE w.worker_id = p_worker_id AND w.session_id = p_session_id AND w.generation = p_generation
     AND w.version = p_expected_version AND w.disabled = false AND w.status = 'online'
     AND w.lease_expires_at > v_now
     AND w.active_leases < w.max_concurrent_runs AND w.active_leases < w.available_slots;
  IF NOT FOUND OR EXISTS (SELECT 1 FROM run_leases l WHERE l.offer_id = p_offer_id) THEN
    RETURN QUERY SELECT 'explain'::text, NULL::text, NULL::integer, NULL::integer, NULL::integer, NULL::text,
      NULL::text, NULL::uuid, NULL::uuid, NULL::integer, NULL::text, NULL::text, NULL::text, NULL::bigint,
      NULL::bigint, NULL::uuid, NULL::integer, NULL::integer, NULL::timestamptz, NULL::timestamptz;
    RETURN;
  END IF;
  -- The head of the queue past the runs the caller holds for a better worker, locked (SKIP LOCKED).
  SELECT r.id, r.version, r.placement_json, r.queue_order, r.attempt_count, r.current_attempt_id, r.task_id,
      r.revision, r.spec_digest INTO v_r
    FROM runs r WHERE r.status = 'queued' AND r.id <> ALL (v_skip)
   ORDER BY r.priority DESC, r.queue_order, r.id LIMIT 1 FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'idle'::text,
      CASE WHEN v_held > 0 THEN 'preferred_elsewhere' ELSE 'no_queued_runs' END,
      v_w.active_leases, least(v_w.max_concurrent_runs, v_w.available_slots), v_held, NULL::text,
      NULL::text, NULL::uuid, NULL::uuid, NULL::integer, NULL::text, NULL::text, NULL::text, NULL::bigint,
      v_now_ms, NULL::uuid, NULL::integer, NULL::integer, NULL::timestamptz, NULL::timestamptz;
    RETURN;
  END IF;
  IF p_caps_digest IS DISTINCT FROM v_w.capabilities_digest THEN
    RETURN QUERY SELECT 'capabilities'::text, NULL::text, NULL::integer, NULL::integer, NULL::integer,
      w.capabilities_digest, w.capabilities_json, NULL::uuid, NULL::uuid, NULL::integer, NULL::text,
      NULL::text, NULL::text, NULL::bigint, NULL::bigint, NULL::uuid, NULL::integer, NULL::integer,
      NULL::timestamptz, NULL::timestamptz
      FROM workers w WHERE w.worker_id = p_worker_id;
    RETURN;
  END IF;
  v_pd := md5(v_r.placement_json);
  IF v_pd = ANY (string_to_array(p_nomatch, ',')) THEN
    kind := 'slow';
    RETURN NEXT;
    RETURN;
  END IF;
  -- Free: decided "take" by the caller for this very queueing (id@queue_order; a requeue starts a new hold).
  IF NOT ((v_r.id::text || '@' || v_r.queue_order) = ANY (string_to_array(p_free, ',')) OR v_pd = ANY (string_to_array(p_match, ','))
      OR (v_pd = ANY (string_to_array(p_holdable, ','))
          AND NOT (p_hold_ms > 0 AND v_now_ms < v_r.queue_order + p_hold_ms))) THEN
    -- An unknown placement, or an open preference hold: the caller decides and asks again.
    RETURN QUERY SELECT CASE WHEN v_pd = ANY (string_to_array(p_holdable, ',')) THEN 'preference' ELSE 'placement' END,
      NULL::text, NULL::integer, NULL::integer, NULL::integer, NULL::text, NULL::text, v_r.id, NULL::uuid,
      NULL::integer, NULL::text, v_pd, v_r.placement_json, v_r.queue_order, v_now_ms, NULL::uuid,
      NULL::integer, NULL::integer, NULL::timestamptz, NULL::timestamptz;
    RETURN;
  END IF;
  -- The reservation: fence, state and capacity again, under the worker's row lock.
  UPDATE workers w SET active_leases = w.active_leases + 1
   WHERE w.worker_id = p_worker_id AND w.session_id = p_session_id AND w.generation = p_generation
     AND w.version = p_expected_version AND w.disabled = false AND w.status = 'online'
     AND w.lease_expires_at > v_now
     AND w.active_leases < w.max_concurrent_runs AND w.active_leases < w.available_slots;
  IF NOT FOUND THEN
    kind := 'explain';
    RETURN NEXT;
    RETURN;
  END IF;
  IF p_clock IS NULL THEN v_now := clock_timestamp(); END IF;
  IF v_r.current_attempt_id IS NOT NULL THEN
    -- An unstarted attempt whose last lease ended: same attempt, next lease generation (R-LSE-5).
    UPDATE attempts a SET worker_id = p_worker_id, session_id = p_session_id,
        lease_generation = a.lease_generation + 1, updated_at = v_now
     WHERE a.id = v_r.current_attempt_id AND a.status = 'claimed' RETURNING a.lease_generation INTO v_gen;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'queued run % points at a started attempt', v_r.id USING ERRCODE = 'QLS01';
    END IF;
    v_attempt := v_r.current_attempt_id;
    v_no := v_r.attempt_count;
  ELSE
    v_attempt := p_attempt_id;
    v_no := v_r.attempt_count + 1;
    v_gen := 1;
    INSERT INTO attempts (id, run_id, attempt_no, status, version, worker_id, session_id, lease_generation,
        created_at, updated_at)
      VALUES (v_attempt, v_r.id, v_no, 'claimed', 0, p_worker_id, p_session_id, 1, v_now, v_now);
  END IF;
  INSERT INTO run_leases (attempt_id, lease_generation, offer_id, run_id, worker_id, session_id,
      session_generation, version, token_digest, state, expires_at, claimed_at)
    VALUES (v_attempt, v_gen, p_offer_id, v_r.id, p_worker_id, p_session_id, p_generation, 0, p_token_digest,
      'active', v_now + p_lease_ms * interval '1 millisecond', v_now)
    ON CONFLICT (offer_id) DO NOTHING
    RETURNING run_leases.expires_at, run_leases.claimed_at INTO v_expires, v_claimed;
  IF NOT FOUND THEN
    -- The same offer id committed by a concurrent call: undo everything; the caller answers the replay.
    RAISE EXCEPTION 'offer % is taken', p_offer_id USING ERRCODE = 'QLR01';
  END IF;
  UPDATE runs r SET status = 'dispatching', version = r.version + 1, event_seq = r.event_seq + 2,
      updated_at = v_now, attempt_count = v_no, current_attempt_id = v_attempt
   WHERE r.id = v_r.id AND r.version = v_r.version RETURNING r.event_seq INTO v_seq;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'run % moved under its row lock', v_r.id USING ERRCODE = 'QLS01';
  END IF;
  INSERT INTO run_events (run_id, seq, type, attempt_id, at, detail) VALUES
    (v_r.id, v_seq - 1, 'run.dispatching', v_attempt, v_now, NULL),
    (v_r.id, v_seq, 'attempt.claimed', v_attempt, v_now,
      '{"attemptNo":' || v_no || ',"leaseGeneration":' || v_gen || ',"workerId":' || to_json(p_worker_id)::text || '}');
  RETURN QUERY SELECT 'offered'::text, NULL::text, NULL::integer, NULL::integer, NULL::integer, NULL::text,
    NULL::text, v_r.id, v_r.task_id, v_r.revision, v_r.spec_digest, v_pd, NULL::text, NULL::bigint, NULL::bigint,
    v_attempt, v_no, v_gen, v_expires, v_claimed;
END
$fn$`;

export class ClaimFunction1765065600000 implements MigrationInterface {
  name = 'ClaimFunction1765065600000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(CLAIM_FUNCTION);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP FUNCTION ${CLAIM_FUNCTION_SIGNATURE}`);
  }
}
