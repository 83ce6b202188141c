-- An ingest group leases what it made due for the node's workers, as a
-- group does on SQLite (issue 16; src/store/sqlite.rs, `lease_group`).
-- Before, each new delivery went into the pending partition and its
-- five indexes, and a claim moved it to the in-flight one: WAL by
-- relation (pg_walinspect over the bench's burn-down) put the pending
-- partition at a third of a delivery's WAL, and every first attempt
-- waited for the wake-up and the claim after the ingest's commit. The ingest statement calls this function after
-- it knows which events it kept and which endpoints are live, and
-- writes the first `take_counts` of each endpoint's new rows in flight
-- under `p_token`, the rest pending.
--
-- The rules are the claim's (dakghar_claim_with_inputs, 0033), in the
-- same order of checks and under the same advisory lock per endpoint
-- (per host with a host cap), held until the ingest commits, so
-- max_in_flight, the host cap and the rate budgets hold across every
-- node and every claim. Only the group's endpoints are leased from, the
-- longest-waiting first, and of each at most one more than the group
-- made (`p_made`): older due work there goes first and is leased here
-- (`older`); getting fewer says none waits. Of the other endpoints it
-- only learns whether one could start due work now (`drained` is then
-- false and the node wakes a claim loop) or is full with work due
-- (`held_back`). An endpoint being claimed elsewhere (its lock taken) is
-- both held back and not drained: its rows wait for that claim's loop.
--
-- `p_endpoints`, `p_made` and `p_first` (the group's earliest new
-- delivery there) are parallel arrays. Nothing is leased when `p_limit`
-- is 0 or the group made nothing.
CREATE FUNCTION dakghar_ingest_lease(p_endpoints TEXT[], p_made BIGINT[], p_first BIGINT[],
    p_now BIGINT, p_lease_until BIGINT, p_limit BIGINT, p_token TEXT,
    p_default_rate BIGINT, p_host_cap BIGINT,
    OUT take_ids TEXT[], OUT take_counts BIGINT[], OUT held_back BOOLEAN,
    OUT drained BOOLEAN, OUT endpoints_json TEXT[], OUT older deliveries[])
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    r RECORD;
    locked TEXT[];
    slots BIGINT;
    free BIGINT;
    take BIGINT;
    n_old BIGINT;
    n_new BIGINT;
    got deliveries[];
    left_over BIGINT := p_limit;
    startable BOOLEAN := false;
    picked_hosts TEXT[] := '{}';
    rated_ids TEXT[] := '{}';
    rated_counts BIGINT[] := '{}';
    cur_window BIGINT := p_now - p_now % 1000;
BEGIN
    take_ids := '{}';
    take_counts := '{}';
    held_back := false;
    drained := false;
    endpoints_json := '{}';
    older := '{}';
    IF COALESCE(p_limit, 0) <= 0 OR COALESCE(cardinality(p_endpoints), 0) = 0 THEN
        RETURN;
    END IF;
    -- Every endpoint's lock first, in one statement: the walk below then
    -- counts each one's slots in one more, after the locks. (A statement
    -- per endpoint and check, as the claim runs, made the ingest of a
    -- ten-endpoint event ~1 ms dearer.)
    SELECT COALESCE(array_agg(e.id), '{}') INTO locked
    FROM (SELECT e.id, e.host FROM endpoints e
          WHERE e.id = ANY(p_endpoints) AND e.state = 'active'
            AND (e.circuit_state <> 'open' OR e.circuit_open_until <= p_now)
            AND (e.throttled_until IS NULL OR e.throttled_until <= p_now)
          ORDER BY e.id) e
    WHERE pg_try_advisory_xact_lock(hashtext(current_schema()),
        hashtext(CASE WHEN p_host_cap > 0 THEN 'host:' || COALESCE(e.host, e.id) ELSE e.id END));
    FOR r IN
        SELECT e.id, e.host, cap.n AS cap, COALESCE(e.rate_limit_per_sec, p_default_rate) AS rate,
            g.made, due.at IS NOT NULL AS has_older, e.id = ANY(locked) AS is_locked,
            (SELECT count(*) FROM deliveries b
             WHERE b.endpoint_id = e.id AND b.state = 'in_flight') AS busy,
            CASE WHEN p_host_cap > 0 AND e.host IS NOT NULL THEN
                (SELECT count(*) FROM deliveries b JOIN endpoints h ON h.id = b.endpoint_id
                 WHERE h.host = e.host AND b.state = 'in_flight') END AS host_busy,
            COALESCE((SELECT w.used FROM rate_windows w
                      WHERE w.key = 'start:' || e.id AND w.window_start = cur_window), 0) AS spent,
            row_to_json(e)::TEXT AS json
        FROM unnest(p_endpoints, p_made, p_first) AS g(id, made, first)
        JOIN endpoints e ON e.id = g.id
        CROSS JOIN LATERAL (SELECT CASE
            WHEN e.circuit_state <> 'closed' THEN 1
            WHEN e.adaptive_cap IS NOT NULL AND e.adaptive_cap < e.max_in_flight THEN e.adaptive_cap
            ELSE e.max_in_flight END AS n) cap
        LEFT JOIN LATERAL (
            SELECT d.next_attempt_at AS at FROM deliveries d
            WHERE d.endpoint_id = e.id AND d.state = 'pending' AND d.next_attempt_at <= p_now
            ORDER BY d.next_attempt_at, d.id LIMIT 1) due ON true
        WHERE e.state = 'active' AND (e.circuit_state <> 'open' OR e.circuit_open_until <= p_now)
          AND (e.throttled_until IS NULL OR e.throttled_until <= p_now)
        ORDER BY LEAST(g.first, due.at), e.id
    LOOP
        -- The claim's limit spoken for: what is left is the loops'.
        IF left_over <= 0 THEN
            startable := true;
            EXIT;
        END IF;
        -- Being claimed elsewhere: held, and a loop must look after.
        IF NOT r.is_locked THEN
            held_back := true;
            startable := true;
            CONTINUE;
        END IF;
        slots := r.cap - r.busy;
        IF r.host_busy IS NOT NULL THEN
            slots := LEAST(slots, p_host_cap - r.host_busy
                - (SELECT count(*) FROM unnest(picked_hosts) t(host) WHERE t.host = r.host));
        END IF;
        IF slots <= 0 THEN
            held_back := true;
            CONTINUE;
        END IF;
        free := slots;
        IF r.rate > 0 THEN
            free := LEAST(free, r.rate - r.spent);
        END IF;
        take := LEAST(free, left_over, r.made + 1);
        -- This second's budget spent: the work waits for the next.
        CONTINUE WHEN take <= 0;
        n_old := 0;
        IF r.has_older THEN
            WITH leased AS (
                UPDATE deliveries d SET state = 'in_flight', claimed_at = p_now,
                    lease_until = p_lease_until, claim_token = p_token, updated_at = p_now
                WHERE d.id IN (
                    SELECT b.id FROM deliveries b
                    WHERE b.endpoint_id = r.id AND b.state = 'pending' AND b.next_attempt_at <= p_now
                    ORDER BY b.next_attempt_at, b.id LIMIT take)
                  AND d.state = 'pending'
                RETURNING d AS whole)
            SELECT COALESCE(array_agg(whole), '{}') INTO got FROM leased;
            n_old := cardinality(got);
            older := older || got;
        END IF;
        n_new := LEAST(r.made, take - n_old);
        -- Every free slot taken: more may wait for one.
        IF n_old + n_new >= slots THEN
            held_back := true;
        END IF;
        -- As many as it asked, fewer than it could start: more may be due.
        IF n_old + n_new = take AND take < free THEN
            startable := true;
        END IF;
        CONTINUE WHEN n_old + n_new = 0;
        IF r.rate > 0 THEN
            rated_ids := rated_ids || r.id;
            rated_counts := rated_counts || (n_old + n_new);
        END IF;
        left_over := left_over - (n_old + n_new);
        IF r.host_busy IS NOT NULL THEN
            picked_hosts := picked_hosts || array_fill(r.host, ARRAY[(n_old + n_new)::INT]);
        END IF;
        IF n_new > 0 THEN
            take_ids := take_ids || r.id;
            take_counts := take_counts || n_new;
        END IF;
        endpoints_json := endpoints_json || r.json;
    END LOOP;
    -- The rate budgets it spent, in one statement.
    IF cardinality(rated_ids) > 0 THEN
        INSERT INTO rate_windows AS w (key, window_start, used)
        SELECT 'start:' || t.id, cur_window, t.n FROM unnest(rated_ids, rated_counts) AS t(id, n)
        ON CONFLICT (key) DO UPDATE SET
            used = CASE WHEN w.window_start = excluded.window_start
                        THEN w.used + excluded.used ELSE excluded.used END,
            window_start = excluded.window_start;
    END IF;
    -- The other endpoints' due work is the loops': whether one could
    -- start some now (a full one holds it back).
    FOR r IN
        SELECT e.id, cap.n AS cap FROM endpoints e
        CROSS JOIN LATERAL (SELECT CASE
            WHEN e.circuit_state <> 'closed' THEN 1
            WHEN e.adaptive_cap IS NOT NULL AND e.adaptive_cap < e.max_in_flight THEN e.adaptive_cap
            ELSE e.max_in_flight END AS n) cap
        WHERE e.state = 'active' AND NOT e.id = ANY(p_endpoints)
          AND (e.circuit_state <> 'open' OR e.circuit_open_until <= p_now)
          AND (e.throttled_until IS NULL OR e.throttled_until <= p_now)
          AND EXISTS (SELECT 1 FROM deliveries d
            WHERE d.endpoint_id = e.id AND d.state = 'pending' AND d.next_attempt_at <= p_now)
    LOOP
        EXIT WHEN startable AND held_back;
        IF (SELECT count(*) FROM deliveries b
            WHERE b.endpoint_id = r.id AND b.state = 'in_flight') < r.cap THEN
            startable := true;
        ELSE
            held_back := true;
        END IF;
    END LOOP;
    drained := NOT startable;
END
$$;
