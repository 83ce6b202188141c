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
    startable BOOLEAN;
    old_ids TEXT[];
    old_counts BIGINT[];
    rated_ids TEXT[];
    rated_counts BIGINT[];
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
    -- Every open endpoint's lock first, in one statement; the plan below
    -- counts their slots after it.
    SELECT COALESCE(array_agg(e.id), '{}') INTO locked
    FROM (SELECT e.id, e.host FROM endpoints e
          WHERE e.id = ANY(p_endpoints) AND e.state = 'active'
            AND (e.circuit_state <> 'open' OR e.circuit_open_until <= p_now)
            AND (e.throttled_until IS NULL OR e.throttled_until <= p_now)
          ORDER BY e.id) e
    WHERE pg_try_advisory_xact_lock(hashtext(current_schema()),
        hashtext(CASE WHEN p_host_cap > 0 THEN 'host:' || COALESCE(e.host, e.id) ELSE e.id END));
    -- The claim's walk, as one statement: a walk in plpgsql, a statement
    -- per endpoint and check, made the server's mean ingest transaction
    -- at 10 % load 1.30-1.48 -> 2.30-3.36 ms (ten endpoints an event).
    -- The endpoints in the claim's order
    -- (longest-waiting first): each may use `use0` (its free slots
    -- within its rate budget, of what the group made and the older due
    -- work there, at most one more than made); a host's room goes to its
    -- endpoints in that order (`picked` before each), then the limit to
    -- all of them in that order (`left_k` before each). Each endpoint
    -- leases `n`, its older rows first; none after the limit ran out.
    WITH base AS (
        SELECT e.id, e.host, g.made, row_to_json(e)::TEXT AS json,
            LEAST(g.first, due.at) AS at, due.waiting, e.id = ANY(locked) AS is_locked,
            cap.n - (SELECT count(*) FROM deliveries b
                     WHERE b.endpoint_id = e.id AND b.state = 'in_flight') AS base_slots,
            CASE WHEN p_host_cap > 0 AND e.host IS NOT NULL THEN
                p_host_cap - (SELECT count(*) FROM deliveries b
                    JOIN endpoints h ON h.id = b.endpoint_id
                    WHERE h.host = e.host AND b.state = 'in_flight') END AS host_room,
            rate.n > 0 AS rated,
            CASE WHEN rate.n > 0 THEN rate.n - COALESCE((SELECT w.used FROM rate_windows w
                WHERE w.key = 'start:' || e.id AND w.window_start = cur_window), 0) END AS budget
        FROM unnest(p_endpoints, p_made, p_first) AS g(id, made, first)
        JOIN endpoints e ON e.id = g.id
        CROSS JOIN LATERAL (SELECT CASE
            WHEN e.circuit_state <> 'closed' THEN 1
            WHEN e.adaptive_cap IS NOT NULL AND e.adaptive_cap < e.max_in_flight THEN e.adaptive_cap
            ELSE e.max_in_flight END AS n) cap
        CROSS JOIN LATERAL (SELECT COALESCE(e.rate_limit_per_sec, p_default_rate) AS n) rate
        -- Its oldest due row and how many are due (at most one more than
        -- made), in one walk of its due index: after a burn-down that
        -- walk steps over the dead entries until a vacuum.
        CROSS JOIN LATERAL (
            SELECT min(o.at) AS at, count(*) AS waiting FROM (
                SELECT d.next_attempt_at AS at FROM deliveries d
                WHERE d.endpoint_id = e.id AND d.state = 'pending' AND d.next_attempt_at <= p_now
                ORDER BY d.next_attempt_at, d.id LIMIT g.made + 1) o) due
        WHERE e.state = 'active' AND (e.circuit_state <> 'open' OR e.circuit_open_until <= p_now)
          AND (e.throttled_until IS NULL OR e.throttled_until <= p_now)),
    wants AS (
        SELECT *, CASE WHEN is_locked THEN GREATEST(0, LEAST(base_slots,
            COALESCE(budget, base_slots), made + 1, made + waiting)) ELSE 0 END AS use0
        FROM base),
    hosts AS (
        SELECT *, LEAST(host_room, COALESCE(sum(use0) OVER (PARTITION BY host ORDER BY at, id
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)) AS picked
        FROM wants),
    slots AS (
        SELECT *, LEAST(base_slots, COALESCE(host_room - picked, base_slots)) AS slots
        FROM hosts),
    free AS (
        SELECT *, LEAST(slots, COALESCE(budget, slots)) AS free FROM slots),
    uses AS (
        SELECT *, CASE WHEN is_locked AND slots > 0
            THEN GREATEST(0, LEAST(free, made + 1, made + waiting)) ELSE 0 END AS use1
        FROM free),
    lefts AS (
        SELECT *, p_limit - LEAST(p_limit, COALESCE(sum(use1) OVER (ORDER BY at, id
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)) AS left_k
        FROM uses),
    plan AS (
        SELECT *, LEAST(use1, left_k) AS n, LEAST(free, left_k, made + 1) AS take,
            LEAST(LEAST(use1, left_k), waiting) AS n_old
        FROM lefts)
    SELECT
        COALESCE(array_agg(id) FILTER (WHERE left_k > 0 AND n > n_old), '{}'),
        COALESCE(array_agg(n - n_old) FILTER (WHERE left_k > 0 AND n > n_old), '{}'),
        -- Held back: being claimed elsewhere, full, or every free slot taken.
        COALESCE(bool_or(left_k > 0 AND (NOT is_locked OR slots <= 0
            OR (take > 0 AND n >= slots))), false),
        -- Left due that could start: the limit ran out, being claimed
        -- elsewhere, or as many as it asked, fewer than it could start.
        COALESCE(bool_or(left_k <= 0 OR NOT is_locked
            OR (slots > 0 AND take > 0 AND n = take AND take < free)), false),
        COALESCE(array_agg(json) FILTER (WHERE left_k > 0 AND n > 0), '{}'),
        COALESCE(array_agg(id) FILTER (WHERE left_k > 0 AND n_old > 0), '{}'),
        COALESCE(array_agg(n_old) FILTER (WHERE left_k > 0 AND n_old > 0), '{}'),
        COALESCE(array_agg(id) FILTER (WHERE left_k > 0 AND n > 0 AND rated), '{}'),
        COALESCE(array_agg(n) FILTER (WHERE left_k > 0 AND n > 0 AND rated), '{}')
    INTO take_ids, take_counts, held_back, startable, endpoints_json, old_ids, old_counts,
        rated_ids, rated_counts
    FROM plan;
    IF cardinality(old_ids) > 0 THEN
        WITH picked AS (
            SELECT b.id FROM unnest(old_ids, old_counts) AS o(id, n)
            CROSS JOIN LATERAL (
                SELECT b.id FROM deliveries b
                WHERE b.endpoint_id = o.id AND b.state = 'pending' AND b.next_attempt_at <= p_now
                ORDER BY b.next_attempt_at, b.id LIMIT o.n) b),
        leased AS (
            UPDATE deliveries d SET state = 'in_flight', claimed_at = p_now,
                lease_until = p_lease_until, claim_token = p_token, updated_at = p_now
            WHERE d.id IN (SELECT id FROM picked) AND d.state = 'pending'
            RETURNING d AS whole)
        SELECT COALESCE(array_agg(whole), '{}') INTO older FROM leased;
    END IF;
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
