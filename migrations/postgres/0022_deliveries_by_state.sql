-- Deliveries stored by state (issue 16). Every claim and every result
-- changed a delivery's state, which index predicates read, so neither was
-- ever a HOT update: each wrote a new tuple and an entry into every one of
-- the table's eleven indexes (fifteen entries per delivered delivery).
-- `deliveries` stays one table to every query, but its rows live in three
-- partitions by state, each with only the indexes its rows need:
-- - `pending_deliveries`: what waits, with the claim's index and the
--   events list's two walks (by account and by endpoint, newest first);
-- - `in_flight_deliveries`: what the nodes hold, small;
-- - `finished_deliveries`: the history, with the dashboard's indexes; the
--   engine only ever inserts into it.
-- A claim or a result moves the row (a delete, and an insert into the
-- destination's indexes alone); the churn and its dead index entries stay
-- in the two small partitions, which the vacuum job keeps clean.
--
-- No foreign keys: a moved row is an inserted row, and checking and
-- key-share locking its event and endpoint on every claim and result
-- (each delivery twice more than at ingest) cost more than the partitions
-- saved. The store keeps what they kept: ingest key-share locks the
-- endpoints it fans out to, once per group, so deleting an endpoint
-- waits for every ingest that saw it; endpoint and account deletion then
-- delete what is left. A unique index of a partitioned table must hold
-- its partition key, so `attempts` cannot reference `deliveries` either:
-- the store deletes a delivery's attempts with it.
--
-- Measured in SQL on one backend, 5 000 events × 10 endpoints
-- (bench/experiments/hot-queue, `partition_design.sql`): ingest
-- 1.5–2.0 s → 0.9–1.1 s, claims 1.9 s → 1.1–1.3 s, results 2.1 → 1.5 s.
ALTER TABLE attempts DROP CONSTRAINT attempts_delivery_id_fkey;
-- Returns the table's row type, which is about to be replaced.
DROP FUNCTION dakghar_claim_due(BIGINT, BIGINT, BIGINT, TEXT, BIGINT, BIGINT);
ALTER TABLE deliveries RENAME TO deliveries_unpartitioned;

CREATE TABLE deliveries (
    id              TEXT NOT NULL,
    account_id      TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    endpoint_id     TEXT NOT NULL,
    state           TEXT NOT NULL
                    CHECK (state IN ('pending', 'in_flight', 'delivered', 'failed', 'expired')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    attempt_seq     BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    give_up_at      BIGINT NOT NULL,
    claimed_at      BIGINT,
    claim_token     TEXT,
    lease_until     BIGINT,
    last_status     BIGINT,
    last_response   BYTEA,
    last_error      TEXT,
    finished_at     BIGINT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    replay_id               TEXT,
    replay_prev_state       TEXT,
    replay_from_seq         BIGINT,
    replay_prev_attempts    BIGINT,
    replay_prev_give_up_at  BIGINT,
    replay_prev_finished_at BIGINT,
    replay_prev_error       TEXT,
    CHECK ((state IN ('delivered', 'failed', 'expired')) = (finished_at IS NOT NULL)),
    CHECK ((state = 'in_flight') = (lease_until IS NOT NULL))
) PARTITION BY LIST (state);
CREATE TABLE pending_deliveries PARTITION OF deliveries FOR VALUES IN ('pending');
CREATE TABLE in_flight_deliveries PARTITION OF deliveries FOR VALUES IN ('in_flight');
CREATE TABLE finished_deliveries PARTITION OF deliveries
    FOR VALUES IN ('delivered', 'failed', 'expired');

INSERT INTO deliveries SELECT * FROM deliveries_unpartitioned;
DROP TABLE deliveries_unpartitioned;

CREATE UNIQUE INDEX pending_deliveries_id ON pending_deliveries (id);
CREATE UNIQUE INDEX pending_deliveries_event ON pending_deliveries (account_id, event_id, endpoint_id);
CREATE INDEX pending_deliveries_due ON pending_deliveries (endpoint_id, next_attempt_at, id);
CREATE INDEX pending_deliveries_account_created ON pending_deliveries (account_id, created_at, event_id);
CREATE INDEX pending_deliveries_endpoint_created ON pending_deliveries (endpoint_id, created_at, event_id);
CREATE INDEX pending_deliveries_replay ON pending_deliveries (replay_id) WHERE replay_id IS NOT NULL;

CREATE UNIQUE INDEX in_flight_deliveries_id ON in_flight_deliveries (id);
CREATE INDEX in_flight_deliveries_endpoint ON in_flight_deliveries (endpoint_id);
CREATE INDEX in_flight_deliveries_event ON in_flight_deliveries (account_id, event_id);
CREATE INDEX in_flight_deliveries_replay ON in_flight_deliveries (replay_id) WHERE replay_id IS NOT NULL;

CREATE UNIQUE INDEX finished_deliveries_id ON finished_deliveries (id);
CREATE UNIQUE INDEX finished_deliveries_event ON finished_deliveries (account_id, event_id, endpoint_id);
CREATE INDEX finished_deliveries_finished ON finished_deliveries (finished_at);
CREATE INDEX finished_deliveries_account_state ON finished_deliveries (account_id, state, created_at, event_id);
CREATE INDEX finished_deliveries_endpoint_created ON finished_deliveries (endpoint_id, created_at, event_id);
CREATE INDEX finished_deliveries_replay ON finished_deliveries (replay_id) WHERE replay_id IS NOT NULL;
-- The expressions are repeated word for word by the events list's query
-- (store/events.rs), as in migration 0018.
CREATE INDEX finished_deliveries_answer_status ON finished_deliveries
    (account_id, last_status, created_at, event_id)
    WHERE (last_status < 200 OR last_status > 299 OR (last_status IS NULL AND last_error IS NOT NULL));
CREATE INDEX finished_deliveries_answer_class ON finished_deliveries (account_id,
    (CASE WHEN last_status IS NOT NULL THEN last_status / 100
          WHEN last_error LIKE 'timed out%' THEN -1 ELSE 0 END),
    created_at, event_id)
    WHERE (last_status < 200 OR last_status > 299 OR (last_status IS NULL AND last_error IS NOT NULL));

-- Rows pass through the two small partitions: vacuum and analyze them
-- early, as migration 0010 did for the whole table.
ALTER TABLE pending_deliveries SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);
ALTER TABLE in_flight_deliveries SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);
ANALYZE deliveries;

-- The claim of migration 0015, unchanged: it reads `deliveries` by state,
-- which keeps each of its statements in one partition.
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
