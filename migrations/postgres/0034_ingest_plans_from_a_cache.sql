-- Ingest's fan-out planned from endpoints a node keeps (issue 16). Each
-- ingest group read its accounts' endpoints before its write: a
-- statement and a round trip on the way of every event at light load,
-- for rows that change a few times a day. An account now carries a
-- version of what decides its fan-out, bumped whenever an endpoint is
-- added or removed, or disabled, enabled or refiltered; a node keeps
-- each account's endpoints with the version it read them at, and the
-- ingest write stores an account's events only where that version is
-- still the account's (otherwise the node reads again and writes them
-- again). Pausing, resuming and the health columns the results rewrite
-- do not change the fan-out, and bump nothing.
ALTER TABLE accounts ADD COLUMN endpoints_version BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION dakghar_fan_out_changed() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE accounts SET endpoints_version = endpoints_version + 1
        WHERE id = CASE WHEN TG_OP = 'DELETE' THEN OLD.account_id ELSE NEW.account_id END;
    RETURN NULL;
END
$$;

CREATE TRIGGER endpoints_fan_out_added_or_removed AFTER INSERT OR DELETE ON endpoints
    FOR EACH ROW EXECUTE FUNCTION dakghar_fan_out_changed();

CREATE TRIGGER endpoints_fan_out_refiltered AFTER UPDATE OF state, event_types ON endpoints
    FOR EACH ROW
    WHEN ((OLD.state = 'disabled') IS DISTINCT FROM (NEW.state = 'disabled')
        OR OLD.event_types IS DISTINCT FROM NEW.event_types)
    EXECUTE FUNCTION dakghar_fan_out_changed();

-- The accounts' versions and what ingest needs of their endpoints, in one
-- snapshot: an account with no endpoint answers one row without one.
-- Planned once per connection, as 0029's read (which stays for nodes of
-- the version before this one during an upgrade).
CREATE FUNCTION dakghar_ingest_fan_out(p_accounts TEXT[])
RETURNS TABLE (account_id TEXT, version BIGINT, endpoint_id TEXT, event_types TEXT)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY SELECT a.id, a.endpoints_version, e.id, e.event_types
        FROM accounts a
        LEFT JOIN endpoints e ON e.account_id = a.id AND e.state <> 'disabled'
        WHERE a.id = ANY(p_accounts)
        ORDER BY a.id, e.created_at, e.id;
END
$$;
