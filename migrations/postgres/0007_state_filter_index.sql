-- The events list's state filter walks this index newest first and stops
-- after a page, so a state that matches little or nothing costs a probe
-- instead of a walk over every event (a delivery is created with its
-- event and shares its created_at). Replay previews use the same prefix.
DROP INDEX deliveries_account_state;
CREATE INDEX deliveries_account_state ON deliveries (account_id, state, created_at, event_id);
