SET search_path=exp;
DROP INDEX deliveries_endpoint_due;
DROP INDEX deliveries_in_flight;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_check1;
CREATE TABLE queue (
  delivery_id TEXT PRIMARY KEY REFERENCES deliveries(id) ON DELETE CASCADE,
  endpoint_id TEXT NOT NULL,
  next_attempt_at BIGINT NOT NULL,
  claimed_at BIGINT,
  lease_until BIGINT,
  claim_token TEXT
);
CREATE INDEX queue_due ON queue (endpoint_id, next_attempt_at, delivery_id) WHERE lease_until IS NULL;
CREATE INDEX queue_leased ON queue (endpoint_id) WHERE lease_until IS NOT NULL;
\ir claim_queue.sql
CREATE OR REPLACE PROCEDURE burn() LANGUAGE plpgsql AS $$
DECLARE ids text[]; toks text[]; n int; total int := 0; t0 timestamptz; tc interval := '0'; tr interval := '0'; t1 timestamptz; td interval := '0'; tu interval := '0'; ta interval := '0';
BEGIN
  LOOP
    t0 := clock_timestamp();
    SELECT array_agg(c.id), array_agg(c.token) INTO ids, toks FROM claim_q(100000, 200000, 100, md5(random()::text), 0, 0) c;
    COMMIT;
    tc := tc + (clock_timestamp()-t0); t0 := clock_timestamp();
    EXIT WHEN ids IS NULL;
    t1 := clock_timestamp();
    DELETE FROM queue q USING unnest(ids, toks) AS i(id, token)
       WHERE q.delivery_id = i.id AND q.claim_token = i.token;
    td := td + (clock_timestamp()-t1); t1 := clock_timestamp();
    UPDATE deliveries d SET state='delivered', attempts = d.attempts+1, attempt_seq=1, next_attempt_at=d.next_attempt_at,
      last_status=204, last_response=NULL, last_error=NULL,
      finished_at=100001, updated_at=100001
    FROM unnest(ids) AS i(id) WHERE d.id=i.id;
    tu := tu + (clock_timestamp()-t1); t1 := clock_timestamp();
    INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, request_headers, response_status, response_headers, response_body, error, classification, endpoint_id)
    SELECT i.id, 1, 100000, 1, '{"a":"b"}', 204, '{}', NULL, NULL, 'success', split_part(i.id,'_',2) FROM unnest(ids) i(id);
    ta := ta + (clock_timestamp()-t1);
    COMMIT;
    tr := tr + (clock_timestamp()-t0);
  END LOOP;
  RAISE NOTICE 'claim % result % (delete % update % attempts %)', tc, tr, td, tu, ta;
END $$;
