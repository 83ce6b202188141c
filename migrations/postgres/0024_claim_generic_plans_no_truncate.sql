-- Two costs of the hot path found with pg_stat_statements (track = all,
-- track_planning = on) over the bench's 10 % load (issue 16):
--
-- The claim function's statements were planned again at almost every
-- call: over 10 752 claims, 5 948 plans of its endpoint walk (1.85 s of
-- planning against 1.26 s of running it) and 2 945 of its UPDATE. The
-- plan cache kept choosing custom plans, as a generic plan of a
-- partitioned table looks dearer; but the partition each statement reads
-- is named by a literal (`state = 'pending'`), so the generic plan prunes
-- it as well, and every parameter here only bounds an index range.
ALTER FUNCTION dakghar_claim_due(BIGINT, BIGINT, BIGINT, TEXT, BIGINT, BIGINT)
    SET plan_cache_mode = force_generic_plan;

-- A vacuum that finds empty pages at the end of a table truncates them,
-- under an ACCESS EXCLUSIVE lock that claims and results then queue
-- behind (seen as claims waiting on a relation lock). The two churned
-- partitions empty and refill all day: their pages are worth keeping.
ALTER TABLE pending_deliveries SET (vacuum_truncate = false);
ALTER TABLE in_flight_deliveries SET (vacuum_truncate = false);
