-- A batch of results updates the endpoints that delivered in one
-- statement, not one a statement (issue 16). At fan-out 10 a result
-- batch under light load holds one attempt for each of ten endpoints,
-- and the loop ran eleven statements: over the bench's
-- 10 % load (pg_stat_statements, nested statements tracked) the ten
-- UPDATEs took 0.18 ms of the call's 0.96 in the executor alone, with
-- each statement's start-up and end on top.
--
-- The rows are still locked in byte order of their ids, first, by a
-- locking read whose sort comes before its locks; the UPDATE then finds
-- them already held. A batch with no success runs one statement as
-- before, one with successes two, where the loop ran one and one more
-- for each endpoint. Recorders on several nodes still cannot deadlock
-- (migration 0026 says why that matters).
--
-- Everything else is migration 0028's function as it was; the
-- assignments are `sql::endpoint_succeeded_set` (SQLite's batch runs
-- them), with `h` for the endpoint's delivered attempts.
CREATE OR REPLACE FUNCTION dakghar_record_attempts(
    p_ids TEXT[], p_tokens TEXT[], p_states TEXT[], p_counted BIGINT[], p_seqs BIGINT[],
    p_next_at BIGINT[], p_status BIGINT[], p_bodies BYTEA[], p_errors TEXT[],
    p_finished_at BIGINT[], p_now BIGINT[], p_started_at BIGINT[], p_duration_ms BIGINT[],
    p_request_headers TEXT[], p_response_headers TEXT[], p_classifications TEXT[],
    p_endpoint_ids TEXT[])
RETURNS SETOF TEXT
LANGUAGE plpgsql
SET enable_seqscan = off
SET enable_nestloop = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    written_ids TEXT[];
    delivered_to TEXT[];
BEGIN
    WITH moved AS (
        UPDATE deliveries d SET state = i.state, attempts = d.attempts + i.counted,
            attempt_seq = i.seq, next_attempt_at = i.next_at,
            claimed_at = NULL, lease_until = NULL, claim_token = NULL,
            last_status = i.status, last_response = i.body, last_error = i.error,
            finished_at = i.finished_at, updated_at = i.now
        FROM unnest(p_ids, p_tokens, p_states, p_counted, p_seqs, p_next_at, p_status,
                    p_bodies, p_errors, p_finished_at, p_now)
             AS i(id, token, state, counted, seq, next_at, status, body, error,
                  finished_at, now)
        WHERE d.id = ANY(p_ids) AND d.id = i.id AND d.state = 'in_flight'
          AND d.claim_token = i.token
        RETURNING d.id)
    SELECT coalesce(array_agg(moved.id), '{}') INTO written_ids FROM moved;

    INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, request_headers,
        response_status, response_headers, response_body, error, classification, endpoint_id)
    SELECT a.* FROM unnest(p_ids, p_seqs, p_started_at, p_duration_ms, p_request_headers,
            p_status, p_response_headers, p_bodies, p_errors, p_classifications, p_endpoint_ids)
        AS a(delivery_id, attempt, started_at, duration_ms, request_headers, response_status,
             response_headers, response_body, error, classification, endpoint_id)
    WHERE a.delivery_id = ANY(written_ids);

    -- The endpoints locked in byte order, before the UPDATE reaches any.
    -- Their ids as an array: an index condition with nested loops off,
    -- where a join would read every endpoint.
    SELECT array_agg(l.id) INTO delivered_to FROM (
        SELECT e.id FROM endpoints e
        WHERE e.id = ANY(ARRAY(
            SELECT r.endpoint_id FROM unnest(p_ids, p_states, p_endpoint_ids)
                AS r(id, state, endpoint_id)
            WHERE r.state = 'delivered' AND r.id = ANY(written_ids)))
        ORDER BY e.id COLLATE "C"
        FOR NO KEY UPDATE) l;
    IF delivered_to IS NULL THEN
        RETURN QUERY SELECT unnest(written_ids);
        RETURN;
    END IF;

    UPDATE endpoints SET failure_streak = 0, transient_streak = 0, failing_since = NULL,
        last_success_at = h.at, circuit_state = 'closed', circuit_open_until = NULL,
        circuit_cooldown_ms = 0, alert_level = 0, alert_expiry_for = NULL,
        throttle_streak = 0, fault = NULL, fault_at = NULL, fault_streak = 0,
        success_run = CASE WHEN adaptive_cap IS NULL THEN 0
            WHEN cap_cut_at >= h.first_started THEN success_run
            WHEN success_run + h.delivered >= adaptive_cap THEN 0
            ELSE success_run + h.delivered END,
        adaptive_cap = CASE WHEN adaptive_cap IS NULL OR cap_cut_at >= h.first_started
                OR success_run + h.delivered < adaptive_cap THEN adaptive_cap
            WHEN adaptive_cap + 1 >= max_in_flight THEN NULL
            ELSE adaptive_cap + 1 END,
        updated_at = h.at
    FROM (SELECT r.endpoint_id, max(r.now) AS at, count(*) AS delivered,
                 min(r.started_at) AS first_started
          FROM unnest(p_ids, p_states, p_now, p_started_at, p_endpoint_ids)
              AS r(id, state, now, started_at, endpoint_id)
          WHERE r.state = 'delivered' AND r.id = ANY(written_ids)
          GROUP BY r.endpoint_id) h
    WHERE endpoints.id = ANY(delivered_to) AND endpoints.id = h.endpoint_id;

    RETURN QUERY SELECT unnest(written_ids);
END
$$;
