-- The events list filtered by type alone walks that type's events newest
-- first; the event-type suggestions step through it one type at a time.
CREATE INDEX events_account_type ON events (account_id, event_type, created_at DESC, id DESC);

-- The list filtered by the last answer (an exact status, a class, a
-- timeout) walks one of these newest first. They hold only deliveries
-- whose last answer was no success, so a delivery that succeeds never
-- enters them: the delivery path pays nothing for them. The expressions
-- are repeated word for word by the list's query (store/events.rs).
CREATE INDEX deliveries_answer_status ON deliveries (account_id, last_status, created_at, event_id)
    WHERE (last_status < 200 OR last_status > 299 OR (last_status IS NULL AND last_error IS NOT NULL));
CREATE INDEX deliveries_answer_class ON deliveries (account_id,
    (CASE WHEN last_status IS NOT NULL THEN last_status / 100
          WHEN last_error LIKE 'timed out%' THEN -1 ELSE 0 END),
    created_at, event_id)
    WHERE (last_status < 200 OR last_status > 299 OR (last_status IS NULL AND last_error IS NOT NULL));
