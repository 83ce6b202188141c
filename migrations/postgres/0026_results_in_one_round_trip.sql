-- A batch of attempt results in one call (issue 16). The recorder's
-- transaction took five round trips plus one per endpoint that
-- delivered (BEGIN with its settings, the delivery update, the attempt
-- insert, each endpoint's success, COMMIT), and the server waited for
-- our side between them: sampled in pg_stat_activity under the bench's
-- 10 % load, result transactions were idle in transaction 41 % of the
-- time, holding the rows they had locked. Here the statement is the
-- transaction.
--
-- The deliveries move only if still claimed by the token that attempt
-- ran under; the attempts are written only for those, and so are the
-- endpoints' successes. Endpoints are locked in byte order of their ids:
-- this is the only statement that locks several endpoint rows, so
-- recorders on several nodes cannot deadlock (a deadlock would fail the
-- whole batch and its deliveries would be sent again).
--
-- The settings are those the transaction sent with BEGIN: the in-flight
-- partition churns faster than its statistics follow, and planned by
-- them the batch's rows were found by scanning it once per row (270 ms
-- for 50 rows at 8 000 in flight). `d.id = ANY(p_ids)` gives the index a
-- condition whichever side comes first; without nested loops the batch
-- is hashed rather than rescanned per row (0.3 ms); a disabled plan
-- costs 10^10, which JIT would take for a huge query; and the generic
-- plan prunes to the in-flight partition by the literal state, where
-- custom plans were made afresh for almost every batch.
--
-- The endpoint update is `sql::ENDPOINT_SUCCEEDED`, which SQLite runs;
-- a change to one is a change to both (the adaptive-cap tests run on
-- both backends).
CREATE FUNCTION dakghar_complete_attempts(
    p_ids TEXT[], p_tokens TEXT[], p_states TEXT[], p_counted BIGINT[], p_seqs BIGINT[],
    p_next_at BIGINT[], p_status BIGINT[], p_bodies BYTEA[], p_errors TEXT[],
    p_finished_at BIGINT[], p_now BIGINT[], p_started_at BIGINT[], p_duration_ms BIGINT[],
    p_request_headers TEXT[], p_response_headers TEXT[], p_classifications TEXT[],
    p_endpoint_ids TEXT[])
RETURNS SETOF deliveries
LANGUAGE plpgsql
SET enable_seqscan = off
SET enable_nestloop = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    written deliveries[];
    written_ids TEXT[];
    h RECORD;
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
        RETURNING d)
    SELECT coalesce(array_agg(moved.d), '{}') INTO written FROM moved;
    written_ids := ARRAY(SELECT w.id FROM unnest(written) AS w);

    INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, request_headers,
        response_status, response_headers, response_body, error, classification, endpoint_id)
    SELECT a.* FROM unnest(p_ids, p_seqs, p_started_at, p_duration_ms, p_request_headers,
            p_status, p_response_headers, p_bodies, p_errors, p_classifications, p_endpoint_ids)
        AS a(delivery_id, attempt, started_at, duration_ms, request_headers, response_status,
             response_headers, response_body, error, classification, endpoint_id)
    WHERE a.delivery_id = ANY(written_ids);

    FOR h IN
        SELECT r.endpoint_id, max(r.now) AS at, count(*) AS delivered,
               min(r.started_at) AS first_started
        FROM unnest(p_ids, p_states, p_now, p_started_at, p_endpoint_ids)
            AS r(id, state, now, started_at, endpoint_id)
        WHERE r.state = 'delivered' AND r.id = ANY(written_ids)
        GROUP BY r.endpoint_id
        ORDER BY r.endpoint_id COLLATE "C"
    LOOP
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
        WHERE id = h.endpoint_id;
    END LOOP;

    RETURN QUERY SELECT * FROM unnest(written);
END
$$;
