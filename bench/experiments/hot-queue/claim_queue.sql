-- The claim of migration 0015 on a queue table: both designs' queue rows
-- carry the columns it reads (endpoint, due time, lease), so one serves both.
SET search_path=exp;
CREATE OR REPLACE FUNCTION claim_q(p_now BIGINT, p_lease_until BIGINT, p_limit BIGINT, p_token TEXT,
    p_default_rate BIGINT, p_host_cap BIGINT)
RETURNS TABLE (id text, token text)
LANGUAGE plpgsql
SET enable_bitmapscan = off
AS $$
DECLARE
    r RECORD;
    free BIGINT;
    spent BIGINT;
    got TID[];
    picked TID[] := '{}';
    picked_hosts TEXT[] := '{}';
    cur_window BIGINT := p_now - p_now % 1000;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    FOR r IN
        SELECT e.id, e.host, cap.n AS cap, COALESCE(e.rate_limit_per_sec, p_default_rate) AS rate
        FROM endpoints e
        CROSS JOIN LATERAL (SELECT CASE
            WHEN e.circuit_state <> 'closed' THEN 1
            WHEN e.adaptive_cap IS NOT NULL AND e.adaptive_cap < e.max_in_flight THEN e.adaptive_cap
            ELSE e.max_in_flight END AS n) cap
        CROSS JOIN LATERAL (
            SELECT q.next_attempt_at AS at FROM queue q
            WHERE q.endpoint_id = e.id AND q.lease_until IS NULL AND q.next_attempt_at <= p_now
            ORDER BY q.next_attempt_at, q.delivery_id LIMIT 1) due
        WHERE e.state = 'active' AND (e.circuit_state <> 'open' OR e.circuit_open_until <= p_now)
          AND (e.throttled_until IS NULL OR e.throttled_until <= p_now)
          AND (SELECT count(*) FROM queue b
               WHERE b.endpoint_id = e.id AND b.lease_until IS NOT NULL) < cap.n
        ORDER BY due.at
    LOOP
        EXIT WHEN cardinality(picked) >= p_limit;
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtext(current_schema()),
            hashtext(CASE WHEN p_host_cap > 0 THEN 'host:' || COALESCE(r.host, r.id) ELSE r.id END));
        SELECT r.cap - count(*) INTO free FROM queue b
        WHERE b.endpoint_id = r.id AND b.lease_until IS NOT NULL;
        CONTINUE WHEN free <= 0;
        got := ARRAY(
            SELECT q.ctid FROM queue q
            WHERE q.endpoint_id = r.id AND q.lease_until IS NULL AND q.next_attempt_at <= p_now
            ORDER BY q.next_attempt_at, q.delivery_id
            LIMIT LEAST(free, p_limit - cardinality(picked)));
        picked := picked || got;
    END LOOP;
    RETURN QUERY
        UPDATE queue q SET claimed_at = p_now, lease_until = p_lease_until, claim_token = p_token
        WHERE q.ctid = ANY(picked) AND q.lease_until IS NULL
        RETURNING q.delivery_id, q.claim_token;
END
$$;
