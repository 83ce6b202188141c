SET search_path=exp;
\timing on
INSERT INTO events (account_id, id, event_type, payload, created_at)
SELECT 'acc1', 'ev'||i, 't', convert_to(repeat('x',1000),'UTF8'), i FROM generate_series(1,5000) i;
INSERT INTO queue (delivery_id, account_id, event_id, endpoint_id, next_attempt_at, give_up_at, created_at)
SELECT 'dl'||i||'_'||j, 'acc1', 'ev'||i, 'ep'||j, i, 99999999999, i FROM generate_series(1,5000) i, generate_series(1,10) j;
