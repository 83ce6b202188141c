SET search_path=exp;
-- Design B: the history row is written once, when an attempt ends. Until
-- then a pending delivery is only a narrow queue row (what a claim and a
-- result need); `deliveries` keeps the dashboard's indexes and takes one
-- INSERT per first result (an upsert for a retry's later results).
DROP INDEX deliveries_endpoint_due;
DROP INDEX deliveries_in_flight;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_check1;
CREATE TABLE queue (
  delivery_id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL,
  event_id TEXT NOT NULL,
  endpoint_id TEXT NOT NULL,
  attempts BIGINT NOT NULL DEFAULT 0,
  next_attempt_at BIGINT NOT NULL,
  give_up_at BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  claimed_at BIGINT,
  lease_until BIGINT,
  claim_token TEXT,
  FOREIGN KEY (account_id, event_id) REFERENCES events(account_id, id) ON DELETE CASCADE
);
CREATE INDEX queue_due ON queue (endpoint_id, next_attempt_at, delivery_id) WHERE lease_until IS NULL;
CREATE INDEX queue_leased ON queue (endpoint_id) WHERE lease_until IS NOT NULL;
\ir claim_queue.sql
CREATE OR REPLACE PROCEDURE burn() LANGUAGE plpgsql AS $$
DECLARE ids text[]; toks text[]; t0 timestamptz; tc interval := '0'; tr interval := '0'; t1 timestamptz; tu interval := '0'; ta interval := '0';
BEGIN
  LOOP
    t0 := clock_timestamp();
    SELECT array_agg(c.id), array_agg(c.token) INTO ids, toks FROM claim_q(100000, 200000, 100, md5(random()::text), 0, 0) c;
    COMMIT;
    tc := tc + (clock_timestamp()-t0); t0 := clock_timestamp();
    EXIT WHEN ids IS NULL;
    t1 := clock_timestamp();
    -- The queue row leaves and the history row is written, in one statement.
    WITH done AS (
      DELETE FROM queue q USING unnest(ids, toks) AS i(id, token)
      WHERE q.delivery_id = i.id AND q.claim_token = i.token
      RETURNING q.*)
    INSERT INTO deliveries AS d (id, account_id, event_id, endpoint_id, state, attempts, attempt_seq,
        next_attempt_at, give_up_at, last_status, finished_at, created_at, updated_at)
    SELECT delivery_id, account_id, event_id, endpoint_id, 'delivered', attempts + 1, 1,
        next_attempt_at, give_up_at, 204, 100001, created_at, 100001 FROM done
    ON CONFLICT (id) DO UPDATE SET state = excluded.state, attempts = excluded.attempts,
        attempt_seq = excluded.attempt_seq, last_status = excluded.last_status,
        finished_at = excluded.finished_at, updated_at = excluded.updated_at;
    tu := tu + (clock_timestamp()-t1); t1 := clock_timestamp();
    INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, request_headers, response_status, response_headers, response_body, error, classification, endpoint_id)
    SELECT i.id, 1, 100000, 1, '{"a":"b"}', 204, '{}', NULL, NULL, 'success', split_part(i.id,'_',2) FROM unnest(ids) i(id);
    ta := ta + (clock_timestamp()-t1);
    COMMIT;
    tr := tr + (clock_timestamp()-t0);
  END LOOP;
  RAISE NOTICE 'claim % result % (queue delete + history insert % attempts %)', tc, tr, tu, ta;
END $$;
