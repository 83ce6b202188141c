-- A claim in one round trip, without a cluster-wide lock (see
-- src/store/postgres.rs::claim_due for the rules it keeps).
--
-- Endpoints with due work and, as last committed, a free slot are visited
-- longest-waiting first. Each is locked for this transaction with a
-- try-lock, so an endpoint another claim holds is passed over, not waited
-- for, and claims on every node run side by side. Only under that lock
-- are its free slots counted, in a statement of their own: a volatile
-- function's statements each take a new snapshot, so the count sees all
-- the lock's previous holder committed. `max_in_flight` (one trial for a
-- half-open circuit) thus holds across every node. Each endpoint gives
-- its oldest due rows, as many as its free slots and what is left of the
-- claim allow, so a claim reads about `p_limit` rows however deep the
-- queue. The slot rule is the same as `CLAIM_SLOTS` (src/store/sqlite.rs).
CREATE FUNCTION dakghar_claim_due(p_now BIGINT, p_lease_until BIGINT, p_limit BIGINT, p_token TEXT)
RETURNS SETOF deliveries
LANGUAGE plpgsql
-- Every delivery leaves a dead entry in the small in-flight index when it
-- moves on, and only a plain index scan marks such entries dead for the
-- next scan to skip: under bitmap scans each claim re-read every dead
-- entry since the last vacuum (43 ms a claim at a million queued).
SET enable_bitmapscan = off
AS $$
DECLARE
    r RECORD;
    free BIGINT;
    picked TEXT[] := '{}';
BEGIN
    -- A lost claim is only pending again, and its result is then refused
    -- as a lost claim: a claim need not wait for the WAL flush.
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
            SELECT d.id FROM deliveries d
            WHERE d.endpoint_id = r.id AND d.state = 'pending' AND d.next_attempt_at <= p_now
            ORDER BY d.next_attempt_at, d.id
            LIMIT LEAST(free, p_limit - cardinality(picked)));
    END LOOP;
    RETURN QUERY
        UPDATE deliveries SET state = 'in_flight', claimed_at = p_now, lease_until = p_lease_until,
            claim_token = p_token, updated_at = p_now
        WHERE id = ANY(picked) AND state = 'pending'
        RETURNING *;
END
$$;
