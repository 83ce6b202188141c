-- The claim in fewer statements (issue 16). Each statement a plpgsql
-- function runs costs ~25 µs to start and end beyond what it does
-- (bench/experiments/claim-overhead: six statements in a claim of one
-- delivery, ~0.17 ms of its 0.50 tracked by none of them), and at light
-- load a claim leases one or two rows. Without a host cap or a rate limit
-- (the common case) the slots counted under the endpoint's lock and the
-- due rows they allow are now one statement, and the commit setting is
-- an assignment, which plpgsql evaluates without the executor.
--
-- Everything else is 0033's function as it was.
CREATE OR REPLACE FUNCTION dakghar_claim_with_inputs(p_now BIGINT, p_lease_until BIGINT, p_limit BIGINT,
    p_token TEXT, p_default_rate BIGINT, p_host_cap BIGINT)
RETURNS TABLE (held_back BOOLEAN, claimed deliveries, event events, endpoint TEXT)
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    r RECORD;
    slots BIGINT;
    free BIGINT;
    spent BIGINT;
    got TID[];
    unused TEXT;
    picked TID[] := '{}';
    held BOOLEAN := false;
    -- The host of each picked row: picked rows are leased only at the end.
    picked_hosts TEXT[] := '{}';
    cur_window BIGINT := p_now - p_now % 1000;
BEGIN
    -- An assignment, not PERFORM: plpgsql evaluates it without starting
    -- the executor.
    unused := set_config('synchronous_commit', 'off', true);
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
        -- it meanwhile. Passed over, full or locked, its due work is held.
        IF (SELECT count(*) FROM deliveries b
            WHERE b.endpoint_id = r.id AND b.state = 'in_flight') >= r.cap THEN
            held := true;
            CONTINUE;
        END IF;
        IF NOT pg_try_advisory_xact_lock(hashtext(current_schema()),
            hashtext(CASE WHEN p_host_cap > 0 THEN 'host:' || COALESCE(r.host, r.id) ELSE r.id END)) THEN
            held := true;
            CONTINUE;
        END IF;
        IF p_host_cap <= 0 AND r.rate <= 0 THEN
            -- No host cap and no rate: the slots counted under the lock and
            -- the due rows they allow, in one statement.
            SELECT s.n, ARRAY(
                SELECT d.ctid FROM deliveries d
                WHERE d.endpoint_id = r.id AND d.state = 'pending' AND d.next_attempt_at <= p_now
                ORDER BY d.next_attempt_at, d.id
                LIMIT GREATEST(LEAST(s.n, p_limit - cardinality(picked)), 0))
            INTO slots, got
            FROM (SELECT r.cap - count(*) AS n FROM deliveries
                  WHERE endpoint_id = r.id AND state = 'in_flight') s;
            IF slots <= 0 THEN
                held := true;
                CONTINUE;
            END IF;
        ELSE
            SELECT r.cap - count(*) INTO slots FROM deliveries
            WHERE endpoint_id = r.id AND state = 'in_flight';
            IF p_host_cap > 0 THEN
                slots := LEAST(slots, p_host_cap - (SELECT count(*) FROM deliveries b
                    JOIN endpoints h ON h.id = b.endpoint_id
                    WHERE h.host = r.host AND b.state = 'in_flight')
                    - (SELECT count(*) FROM unnest(picked_hosts) t(host) WHERE t.host = r.host));
            END IF;
            free := slots;
            IF r.rate > 0 THEN
                SELECT w.used INTO spent FROM rate_windows w
                WHERE w.key = 'start:' || r.id AND w.window_start = cur_window;
                free := LEAST(free, r.rate - COALESCE(spent, 0));
            END IF;
            IF slots <= 0 THEN
                held := true;
                CONTINUE;
            END IF;
            CONTINUE WHEN free <= 0;
            got := ARRAY(
                SELECT d.ctid FROM deliveries d
                WHERE d.endpoint_id = r.id AND d.state = 'pending' AND d.next_attempt_at <= p_now
                ORDER BY d.next_attempt_at, d.id
                LIMIT LEAST(free, p_limit - cardinality(picked)));
        END IF;
        -- Every free slot taken: more may wait for one (or none did; the
        -- wake-up that costs is one claim).
        IF cardinality(got) >= slots THEN
            held := true;
        END IF;
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
    IF cardinality(picked) = 0 THEN
        -- Nothing to lease; a claim that found every endpoint full still
        -- says so, in one row without a delivery.
        IF held THEN
            RETURN QUERY SELECT true, NULL::deliveries, NULL::events, NULL::TEXT;
        END IF;
        RETURN;
    END IF;
    -- This statement's snapshot is taken after the walk's: every picked
    -- delivery's event and endpoint were committed before it was seen.
    RETURN QUERY
        WITH leased AS (
            UPDATE deliveries d SET state = 'in_flight', claimed_at = p_now,
                lease_until = p_lease_until, claim_token = p_token, updated_at = p_now
            WHERE d.ctid = ANY(picked) AND d.state = 'pending'
            RETURNING d AS whole, d.account_id, d.event_id, d.endpoint_id)
        SELECT held, l.whole, e,
            CASE WHEN row_number() OVER (PARTITION BY l.endpoint_id) = 1
                THEN row_to_json(ep)::TEXT END
        FROM leased l
        LEFT JOIN events e ON e.account_id = l.account_id AND e.id = l.event_id
        LEFT JOIN endpoints ep ON ep.id = l.endpoint_id;
END
$$;
