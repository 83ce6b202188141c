INSERT INTO accounts (id, name, created_at) VALUES ('acc', 'acc', 0);
-- Room for every claim of a run: no endpoint is ever full.
INSERT INTO endpoints (id, account_id, url, secret, max_in_flight, created_at, updated_at, host)
SELECT 'ep' || g, 'acc', 'http://127.0.0.1/x', 's', 1000000, 0, 0, '127.0.0.1'
FROM generate_series(0, 9) g;
INSERT INTO events (account_id, id, event_type, payload, created_at)
SELECT 'acc', 'ev' || g, 'a.b', convert_to(repeat('x', 1000), 'UTF8'), g
FROM generate_series(1, 20000) g;
INSERT INTO deliveries (id, account_id, event_id, endpoint_id, state, next_attempt_at,
    give_up_at, created_at, updated_at)
SELECT 'd' || g || '-' || e, 'acc', 'ev' || g, 'ep' || e, 'pending', g, 1e12, g, g
FROM generate_series(1, 20000) g, generate_series(0, 9) e;
VACUUM ANALYZE;
