-- Respecting receivers (SPEC §11). A 429 or 503 throttles the whole
-- endpoint: no claim takes its work before `throttled_until`, and the
-- deliveries come back spread over a short window after it
-- (`throttled_at` gives the wait's length). `throttle_streak` counts
-- throttles in a row, for the backoff when no Retry-After came.
ALTER TABLE endpoints ADD COLUMN throttled_until BIGINT;
ALTER TABLE endpoints ADD COLUMN throttled_at BIGINT;
ALTER TABLE endpoints ADD COLUMN throttle_status BIGINT;
ALTER TABLE endpoints ADD COLUMN throttle_streak BIGINT NOT NULL DEFAULT 0;
-- The adaptive in-flight cap under `max_in_flight`: NULL is at the
-- ceiling. It halves on a 429, 503 or timeout (once per attempt started
-- after the last cut, `cap_cut_at`) and grows by one after as many
-- successes in a row as the cap (`success_run`).
ALTER TABLE endpoints ADD COLUMN adaptive_cap BIGINT;
ALTER TABLE endpoints ADD COLUMN cap_cut_at BIGINT;
ALTER TABLE endpoints ADD COLUMN success_run BIGINT NOT NULL DEFAULT 0;
-- The receiver an endpoint's URL names, as `host:port`: a cap on
-- concurrent attempts per receiver holds across endpoints and accounts.
-- Written by Dakghar from the URL (existing rows at start-up).
ALTER TABLE endpoints ADD COLUMN host TEXT;
CREATE INDEX endpoints_host ON endpoints (host);
-- An endpoint's own retry policy (chapter 004), NULL for the
-- installation's: `exponential|linear|fixed`, and a status list as
-- `--retry-statuses` takes it.
ALTER TABLE endpoints ADD COLUMN retry_strategy TEXT;
ALTER TABLE endpoints ADD COLUMN retry_statuses TEXT;
-- When the endpoint was paused, so a resume can say how much of the
-- backlog expired meanwhile.
ALTER TABLE endpoints ADD COLUMN paused_at BIGINT;

-- The claim of migration 0014 with the rules of SPEC §11, kept the same
-- as `sqlite::claim_due`:
-- - a throttled endpoint gives nothing;
-- - a closed circuit's cap is the adaptive one (under max_in_flight);
-- - the rate limit (the endpoint's, else `p_default_rate`; 0 is none) is
--   spent here, in `rate_windows`, so retries, resends and first tries
--   share one budget on every node, with no write per attempt;
-- - with `p_host_cap` > 0, at most that many attempts in flight per
--   receiver host. The lock is then the host's, not the endpoint's, so
--   the host's count and each of its endpoints' counts are exact across
--   nodes (advisory locks are re-entrant: a claim that holds a host
--   takes its other endpoints too).
DROP FUNCTION dakghar_claim_due(BIGINT, BIGINT, BIGINT, TEXT);
CREATE FUNCTION dakghar_claim_due(p_now BIGINT, p_lease_until BIGINT, p_limit BIGINT, p_token TEXT,
    p_default_rate BIGINT, p_host_cap BIGINT)
RETURNS SETOF deliveries
LANGUAGE plpgsql
SET enable_bitmapscan = off
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
          AND (SELECT count(*) FROM deliveries b
               WHERE b.endpoint_id = e.id AND b.state = 'in_flight') < cap.n
        ORDER BY due.at
    LOOP
        EXIT WHEN cardinality(picked) >= p_limit;
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
