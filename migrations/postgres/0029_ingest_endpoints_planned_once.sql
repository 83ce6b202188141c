-- Ingest's read of the accounts' endpoints, planned once per connection
-- (issue 16). As a statement from the server it was planned afresh on
-- every call: with an array parameter Postgres kept preferring a custom
-- plan (pg_stat_statements over the bench's 10 % load: 3 065 plans for
-- 3 050 calls, 0.23 ms of planning against 0.06 ms of execution, on the
-- way of every ingest group). The generic plan is the custom one: the
-- account index, whatever the array holds.
CREATE FUNCTION dakghar_ingest_endpoints(p_accounts TEXT[])
RETURNS SETOF endpoints
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY SELECT * FROM endpoints
        WHERE account_id = ANY(p_accounts) AND state <> 'disabled'
        ORDER BY created_at, id;
END
$$;
