SET search_path=exp;
INSERT INTO accounts VALUES ('acc1','acc1',0,NULL);
INSERT INTO endpoints (id, account_id, url, secret, max_in_flight, created_at, updated_at, host)
SELECT 'ep'||i, 'acc1', 'http://127.0.0.1:9/x', 's', 100, 0, 0, '127.0.0.1:9' FROM generate_series(1,10) i;
