-- The in-flight partition empties and refills all the time, so its
-- statistics often say it is empty when it is not: whenever autovacuum
-- last analyzed it in a quiet moment, and on a fresh installation until
-- its first analyze. A plan made then, and a generic plan (migration
-- 0024) is kept for the session, counts each endpoint's in-flight rows
-- by scanning the whole partition: the bench's lone claimer took 98 ms
-- a claim at ~8 000 in flight over 1 000 endpoints, 14 before 0024
-- (bench/results/2026-12-03-postgres-claims-lone-claimer-plan.txt).
-- Migration 0024's note that every parameter only bounds an index range
-- was wrong for that reason. Each in-flight count has its index, so the
-- claim plans without sequential scans.
--
-- JIT goes with it: a disabled scan still costs 10^10 where no index
-- serves (the walk reads every endpoint), which JIT takes for a huge
-- query and compiles at every call; in psql that made a claim 800 ms
-- instead of 18.
ALTER FUNCTION dakghar_claim_due(BIGINT, BIGINT, BIGINT, TEXT, BIGINT, BIGINT)
    SET enable_seqscan = off;
ALTER FUNCTION dakghar_claim_due(BIGINT, BIGINT, BIGINT, TEXT, BIGINT, BIGINT)
    SET jit = off;
