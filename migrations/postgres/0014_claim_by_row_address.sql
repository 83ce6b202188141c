-- The claim's last step leased its picked rows by id (`id = ANY(picked)`).
-- Inside the function that statement runs on a generic plan, and the
-- planner, going by the small pending index it had last analyzed, walked
-- that whole index filtering on the ids instead of probing the primary
-- key: at 50 000 queued, 20 000–50 000 index rows and 10–33 ms a claim,
-- most of Postgres's time per delivery in the bench (auto_explain).
--
-- The rows are now leased by their row address, which only a TID scan
-- reads: no plan to go wrong. The endpoint's lock keeps other claims off
-- these rows meanwhile; any other change to a row between pick and lease
-- moves it to a new address, so the lease skips it, as `state =
-- 'pending'` skips a row another statement finished.
CREATE OR REPLACE FUNCTION dakghar_claim_due(p_now BIGINT, p_lease_until BIGINT, p_limit BIGINT, p_token TEXT)
RETURNS SETOF deliveries
LANGUAGE plpgsql
SET enable_bitmapscan = off
AS $$
DECLARE
    r RECORD;
    free BIGINT;
    picked TID[] := '{}';
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    FOR r IN
        SELECT e.id, CASE WHEN e.circuit_state = 'closed' THEN e.max_in_flight ELSE 1 END AS cap
        FROM endpoints e
        CROSS JOIN LATERAL (
            SELECT d.next_attempt_at AS at FROM deliveries d
            WHERE d.endpoint_id = e.id AND d.state = 'pending' AND d.next_attempt_at <= p_now
            ORDER BY d.next_attempt_at, d.id LIMIT 1) due
        WHERE e.state = 'active' AND (e.circuit_state <> 'open' OR e.circuit_open_until <= p_now)
          AND (SELECT count(*) FROM deliveries b
               WHERE b.endpoint_id = e.id AND b.state = 'in_flight')
              < CASE WHEN e.circuit_state = 'closed' THEN e.max_in_flight ELSE 1 END
        ORDER BY due.at
    LOOP
        EXIT WHEN cardinality(picked) >= p_limit;
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtext(current_schema()), hashtext(r.id));
        SELECT r.cap - count(*) INTO free FROM deliveries
        WHERE endpoint_id = r.id AND state = 'in_flight';
        CONTINUE WHEN free <= 0;
        picked := picked || ARRAY(
            SELECT d.ctid FROM deliveries d
            WHERE d.endpoint_id = r.id AND d.state = 'pending' AND d.next_attempt_at <= p_now
            ORDER BY d.next_attempt_at, d.id
            LIMIT LEAST(free, p_limit - cardinality(picked)));
    END LOOP;
    RETURN QUERY
        UPDATE deliveries SET state = 'in_flight', claimed_at = p_now, lease_until = p_lease_until,
            claim_token = p_token, updated_at = p_now
        WHERE ctid = ANY(picked) AND state = 'pending'
        RETURNING *;
END
$$;
