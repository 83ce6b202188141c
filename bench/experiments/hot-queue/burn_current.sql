SET search_path=exp;
CREATE OR REPLACE PROCEDURE burn() LANGUAGE plpgsql AS $$
DECLARE ids text[]; toks text[]; n int; total int := 0; t0 timestamptz; tc interval := '0'; tr interval := '0'; t1 timestamptz; tu interval := '0'; ta interval := '0';
BEGIN
  LOOP
    t0 := clock_timestamp();
    SELECT array_agg(id), array_agg(claim_token) INTO ids, toks FROM dakghar_claim_due(100000, 200000, 100, md5(random()::text), 0, 0);
    COMMIT;
    tc := tc + (clock_timestamp()-t0); t0 := clock_timestamp();
    EXIT WHEN ids IS NULL;
    t1 := clock_timestamp();
    UPDATE deliveries d SET state='delivered', attempts = d.attempts+1, attempt_seq=1, next_attempt_at=d.next_attempt_at,
      claimed_at=NULL, claim_token=NULL, lease_until=NULL, last_status=204, last_response=NULL, last_error=NULL,
      finished_at=100001, updated_at=100001
    FROM unnest(ids, toks) AS i(id, token) WHERE d.id=i.id AND d.state='in_flight' AND d.claim_token=i.token;
    tu := tu + (clock_timestamp()-t1); t1 := clock_timestamp();
    INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, request_headers, response_status, response_headers, response_body, error, classification, endpoint_id)
    SELECT i.id, 1, 100000, 1, '{"a":"b"}', 204, '{}', NULL, NULL, 'success', split_part(i.id,'_',2) FROM unnest(ids) i(id);
    ta := ta + (clock_timestamp()-t1);
    COMMIT;
    tr := tr + (clock_timestamp()-t0);
  END LOOP;
  RAISE NOTICE 'claim % result % (update % attempts %)', tc, tr, tu, ta;
END $$;
