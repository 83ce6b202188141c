-- Migration 0033's claim answering the same data as columns, not composites.
CREATE FUNCTION claim_columns(p_now bigint, p_lease_until bigint, p_limit bigint, p_token text, p_default_rate bigint, p_host_cap bigint)
 RETURNS TABLE(held_back boolean, id text, account_id text, event_id text, endpoint_id text, state text, attempts bigint, attempt_seq bigint, next_attempt_at bigint, give_up_at bigint, claimed_at bigint, claim_token text, lease_until bigint, last_status bigint, last_response bytea, last_error text, finished_at bigint, created_at bigint, updated_at bigint, has_event boolean, event_type text, event_payload bytea, event_created_at bigint, event_traceparent text, endpoint_json text)
 LANGUAGE plpgsql
 SET enable_bitmapscan TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    r RECORD;
    slots BIGINT;
    free BIGINT;
    spent BIGINT;
    got TID[];
    picked TID[] := '{}';
    held BOOLEAN := false;
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
            RETURN QUERY SELECT true, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL::BOOLEAN, NULL, NULL, NULL::BIGINT, NULL, NULL;
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
            RETURNING d.id, d.account_id, d.event_id, d.endpoint_id, d.state, d.attempts, d.attempt_seq, d.next_attempt_at, d.give_up_at, d.claimed_at, d.claim_token, d.lease_until, d.last_status, d.last_response, d.last_error, d.finished_at, d.created_at, d.updated_at)
        SELECT held, l.id, l.account_id, l.event_id, l.endpoint_id, l.state, l.attempts, l.attempt_seq, l.next_attempt_at, l.give_up_at, l.claimed_at, l.claim_token, l.lease_until, l.last_status, l.last_response, l.last_error, l.finished_at, l.created_at, l.updated_at, e.id IS NOT NULL, e.event_type, e.payload, e.created_at, e.traceparent,
            CASE WHEN row_number() OVER (PARTITION BY l.endpoint_id) = 1
                THEN row_to_json(ep)::TEXT END
        FROM leased l
        LEFT JOIN events e ON e.account_id = l.account_id AND e.id = l.event_id
        LEFT JOIN endpoints ep ON ep.id = l.endpoint_id;
END
$function$
;
