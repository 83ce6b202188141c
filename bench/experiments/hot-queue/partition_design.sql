SET search_path=exp;
-- Design C: `deliveries` stays one table to every query but is stored as
-- three partitions by state. Only what is waiting sits in the small
-- `pending_deliveries` with the claim's index; a claim moves a row into
-- `in_flight_deliveries` (three indexes) and a result into
-- `finished_deliveries`, which carries the dashboard's indexes and is only
-- ever inserted into by the engine. A move is a delete plus an insert
-- into the destination's indexes alone.
ALTER TABLE attempts DROP CONSTRAINT attempts_delivery_id_fkey;
DROP FUNCTION dakghar_claim_due(BIGINT, BIGINT, BIGINT, TEXT, BIGINT, BIGINT);
ALTER TABLE deliveries RENAME TO deliveries_old;
CREATE TABLE deliveries (LIKE deliveries_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
  PARTITION BY LIST (state);
CREATE TABLE pending_deliveries PARTITION OF deliveries FOR VALUES IN ('pending');
CREATE TABLE in_flight_deliveries PARTITION OF deliveries FOR VALUES IN ('in_flight');
CREATE TABLE finished_deliveries PARTITION OF deliveries FOR VALUES IN ('delivered', 'failed', 'expired');
INSERT INTO deliveries SELECT * FROM deliveries_old;
DROP TABLE deliveries_old;
CREATE UNIQUE INDEX ON pending_deliveries (id);
CREATE UNIQUE INDEX ON pending_deliveries (account_id, event_id, endpoint_id);
CREATE INDEX ON pending_deliveries (endpoint_id, next_attempt_at, id);
-- The events list filtered by state or endpoint walks these newest first.
CREATE INDEX ON pending_deliveries (account_id, created_at, event_id);
CREATE INDEX ON pending_deliveries (endpoint_id, created_at, event_id);
CREATE UNIQUE INDEX ON in_flight_deliveries (id);
CREATE INDEX ON in_flight_deliveries (endpoint_id);
CREATE INDEX ON in_flight_deliveries (account_id, event_id);
CREATE INDEX ON pending_deliveries (replay_id) WHERE replay_id IS NOT NULL;
CREATE INDEX ON in_flight_deliveries (replay_id) WHERE replay_id IS NOT NULL;
CREATE UNIQUE INDEX ON finished_deliveries (id);
CREATE UNIQUE INDEX ON finished_deliveries (account_id, event_id, endpoint_id);
CREATE INDEX ON finished_deliveries (replay_id) WHERE replay_id IS NOT NULL;
CREATE INDEX ON finished_deliveries (finished_at);
CREATE INDEX ON finished_deliveries (account_id, state, created_at, event_id);
CREATE INDEX ON finished_deliveries (endpoint_id, created_at, event_id);
CREATE INDEX ON finished_deliveries (account_id, last_status, created_at, event_id)
    WHERE (last_status < 200 OR last_status > 299 OR (last_status IS NULL AND last_error IS NOT NULL));
CREATE INDEX ON finished_deliveries (account_id,
    (CASE WHEN last_status IS NOT NULL THEN last_status / 100
          WHEN last_error LIKE 'timed out%' THEN -1 ELSE 0 END),
    created_at, event_id)
    WHERE (last_status < 200 OR last_status > 299 OR (last_status IS NULL AND last_error IS NOT NULL));
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
