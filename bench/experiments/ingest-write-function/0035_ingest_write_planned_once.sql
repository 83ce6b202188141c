-- An experiment, not applied (README, performance, eleventh pass): the
-- function cost 0.05-0.10 ms a call more than the inline statement it
-- wraps, whose plan the plan cache had already made generic. To try it:
-- copy it into migrations/postgres/ and call it from write_events.

-- Ingest's write, planned once per connection (issue 16). As a statement
-- from the server Postgres planned it afresh on every call, as it had
-- 0029's read: with array parameters it kept choosing a custom plan
-- (pg_stat_statements over the bench's 10 % load: 0.048 ms of planning a
-- call against 0.67 ms of execution, on the way of every ingest group).
-- Every array is only joined or probed through a primary key, so the
-- generic plan is the custom one whatever the arrays hold.
--
-- Stores the events whose key (if they name one) is active and whose
-- account's `endpoints_version` is the one the node planned with (an
-- account absent from p_version_accounts is not checked), and the
-- planned deliveries of the events it stored to endpoints still there
-- and not disabled, which it key-share locks until commit. Answers the
-- stored events, the deliveries made, the active keys and the accounts
-- found fresh.
CREATE FUNCTION dakghar_ingest_write(
    p_accounts TEXT[], p_ids TEXT[], p_types TEXT[], p_payloads BYTEA[],
    p_created_at BIGINT[], p_traceparents TEXT[], p_endpoints TEXT[],
    p_delivery_ids TEXT[], p_delivery_accounts TEXT[], p_delivery_events TEXT[],
    p_delivery_endpoints TEXT[], p_delivery_at BIGINT[], p_give_up_at BIGINT[],
    p_keys TEXT[], p_event_keys TEXT[], p_version_accounts TEXT[], p_versions BIGINT[],
    OUT o_kept_accounts TEXT[], OUT o_kept_ids TEXT[], OUT o_made TEXT[],
    OUT o_active TEXT[], OUT o_fresh TEXT[])
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_nestloop = off
AS $$
BEGIN
    WITH active AS (
        SELECT id FROM api_keys WHERE id = ANY(p_keys) AND revoked_at IS NULL
        UNION ALL
        SELECT id FROM platform_keys WHERE id = ANY(p_keys) AND revoked_at IS NULL),
    fresh AS (
        SELECT v.id FROM unnest(p_version_accounts, p_versions) AS v(id, version)
        WHERE (SELECT endpoints_version FROM accounts WHERE id = v.id) = v.version),
    kept AS (
        INSERT INTO events (account_id, id, event_type, payload, created_at, traceparent)
        SELECT n.account_id, n.id, n.event_type, n.payload, n.created_at, n.traceparent
        FROM unnest(p_accounts, p_ids, p_types, p_payloads, p_created_at, p_traceparents,
            p_event_keys)
            AS n(account_id, id, event_type, payload, created_at, traceparent, key_id)
        WHERE (n.key_id IS NULL OR n.key_id IN (SELECT id FROM active))
            AND (n.account_id IN (SELECT id FROM fresh)
                OR NOT n.account_id = ANY(p_version_accounts))
        ON CONFLICT DO NOTHING RETURNING account_id, id),
    live AS (
        SELECT id FROM endpoints WHERE id = ANY(p_endpoints) AND state <> 'disabled'
        FOR KEY SHARE),
    made AS (
        INSERT INTO deliveries (id, account_id, event_id, endpoint_id, state,
            next_attempt_at, give_up_at, created_at, updated_at)
        SELECT i.id, i.account_id, i.event_id, i.endpoint_id, 'pending', i.at,
            i.give_up_at, i.at, i.at
        FROM unnest(p_delivery_ids, p_delivery_accounts, p_delivery_events,
            p_delivery_endpoints, p_delivery_at, p_give_up_at)
            AS i(id, account_id, event_id, endpoint_id, at, give_up_at)
        WHERE (i.account_id, i.event_id) IN (SELECT account_id, id FROM kept)
            AND i.endpoint_id IN (SELECT id FROM live)
        RETURNING id)
    SELECT ARRAY(SELECT account_id FROM kept), ARRAY(SELECT id FROM kept),
        ARRAY(SELECT id FROM made), ARRAY(SELECT id FROM active),
        ARRAY(SELECT id FROM fresh)
    INTO o_kept_accounts, o_kept_ids, o_made, o_active, o_fresh;
END
$$;
