-- A claim counts the in-flight rows only of the endpoints it reaches
-- (issue 16). The walk ordered every endpoint with due work by its oldest
-- due delivery, and counted each one's in-flight rows to leave out the
-- full ones: two index probes per endpoint per claim, where a claim of
-- 100 at 10 slots an endpoint reaches about ten. At 1 000 endpoints with
-- due work a lone claim took ~11 ms and sixteen claimers did 1.6 times
-- what one did (bench/results/2026-12-04-postgres-claims-7a24139-run1.md):
-- the walk is CPU on two cores. The count now happens in the loop, once
-- before the endpoint's lock (a full one is passed over without it) and
-- once under it, as before.
--
-- The settings migrations 0024 and 0025 gave the function are restated:
-- CREATE OR REPLACE sets the function's settings to those it names.
CREATE OR REPLACE FUNCTION dakghar_claim_due(p_now BIGINT, p_lease_until BIGINT, p_limit BIGINT, p_token TEXT,
    p_default_rate BIGINT, p_host_cap BIGINT)
RETURNS SETOF deliveries
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    r RECORD;
    free BIGINT;
    spent BIGINT;
    got TID[];
    picked TID[] := '{}';
    -- The host of each picked row: picked rows are leased only at the end.
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
            SELECT d.next_attempt_at AS at FROM deliveries d
            WHERE d.endpoint_id = e.id AND d.state = 'pending' AND d.next_attempt_at <= p_now
            ORDER BY d.next_attempt_at, d.id LIMIT 1) due
        WHERE e.state = 'active' AND (e.circuit_state <> 'open' OR e.circuit_open_until <= p_now)
          AND (e.throttled_until IS NULL OR e.throttled_until <= p_now)
        ORDER BY due.at
    LOOP
        EXIT WHEN cardinality(picked) >= p_limit;
        -- Counted before the lock so a full endpoint is passed over
        -- without one, and again under it: another claim may have filled
        -- it meanwhile.
        CONTINUE WHEN (SELECT count(*) FROM deliveries b
                       WHERE b.endpoint_id = r.id AND b.state = 'in_flight') >= r.cap;
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtext(current_schema()),
            hashtext(CASE WHEN p_host_cap > 0 THEN 'host:' || COALESCE(r.host, r.id) ELSE r.id END));
        SELECT r.cap - count(*) INTO free FROM deliveries
        WHERE endpoint_id = r.id AND state = 'in_flight';
        IF p_host_cap > 0 THEN
            free := LEAST(free, p_host_cap - (SELECT count(*) FROM deliveries b
                JOIN endpoints h ON h.id = b.endpoint_id
                WHERE h.host = r.host AND b.state = 'in_flight')
                - (SELECT count(*) FROM unnest(picked_hosts) t(host) WHERE t.host = r.host));
        END IF;
        IF r.rate > 0 THEN
            SELECT w.used INTO spent FROM rate_windows w
            WHERE w.key = 'start:' || r.id AND w.window_start = cur_window;
            free := LEAST(free, r.rate - COALESCE(spent, 0));
        END IF;
        CONTINUE WHEN free <= 0;
        got := ARRAY(
            SELECT d.ctid FROM deliveries d
            WHERE d.endpoint_id = r.id AND d.state = 'pending' AND d.next_attempt_at <= p_now
            ORDER BY d.next_attempt_at, d.id
            LIMIT LEAST(free, p_limit - cardinality(picked)));
        IF r.rate > 0 AND cardinality(got) > 0 THEN
            INSERT INTO rate_windows AS w (key, window_start, used)
            VALUES ('start:' || r.id, cur_window, cardinality(got))
            ON CONFLICT (key) DO UPDATE SET
                used = CASE WHEN w.window_start = excluded.window_start
                            THEN w.used + excluded.used ELSE excluded.used END,
                window_start = excluded.window_start;
        END IF;
        picked := picked || got;
        IF p_host_cap > 0 THEN
            picked_hosts := picked_hosts || array_fill(r.host, ARRAY[cardinality(got)]);
        END IF;
    END LOOP;
    RETURN QUERY
        UPDATE deliveries SET state = 'in_flight', claimed_at = p_now, lease_until = p_lease_until,
            claim_token = p_token, updated_at = p_now
        WHERE ctid = ANY(picked) AND state = 'pending'
        RETURNING *;
END
$$;
