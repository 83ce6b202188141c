-- The functions earlier versions called and this one does not (issue 16).
-- Each was kept by the migration that replaced it, for nodes of the
-- version before still running during an upgrade: the claim before 0032
-- (dakghar_claim_round, and dakghar_claim_due before 0030), the results
-- before 0028 (dakghar_complete_attempts) and ingest's endpoint read
-- before 0034 (dakghar_ingest_endpoints). A node of those versions must
-- be stopped before this one migrates the database.
DROP FUNCTION dakghar_claim_due(BIGINT, BIGINT, BIGINT, TEXT, BIGINT, BIGINT);
DROP FUNCTION dakghar_claim_round(BIGINT, BIGINT, BIGINT, TEXT, BIGINT, BIGINT);
DROP FUNCTION dakghar_complete_attempts(TEXT[], TEXT[], TEXT[], BIGINT[], BIGINT[], BIGINT[],
    BIGINT[], BYTEA[], TEXT[], BIGINT[], BIGINT[], BIGINT[], BIGINT[], TEXT[], TEXT[], TEXT[],
    TEXT[]);
DROP FUNCTION dakghar_ingest_endpoints(TEXT[]);
