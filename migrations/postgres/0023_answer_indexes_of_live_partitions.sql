-- The events list filtered by the last answer (migration 0018) matches
-- deliveries waiting for a retry too, whose last answer was a failure:
-- without these the filter read all of `pending_deliveries` (0022). They
-- hold only deliveries whose last answer was no success, so a first
-- attempt's row never enters them. The expressions are repeated word for
-- word by the list's query (store/events.rs).
CREATE INDEX pending_deliveries_answer_status ON pending_deliveries
    (account_id, last_status, created_at, event_id)
    WHERE (last_status < 200 OR last_status > 299 OR (last_status IS NULL AND last_error IS NOT NULL));
CREATE INDEX pending_deliveries_answer_class ON pending_deliveries (account_id,
    (CASE WHEN last_status IS NOT NULL THEN last_status / 100
          WHEN last_error LIKE 'timed out%' THEN -1 ELSE 0 END),
    created_at, event_id)
    WHERE (last_status < 200 OR last_status > 299 OR (last_status IS NULL AND last_error IS NOT NULL));
CREATE INDEX in_flight_deliveries_answer_status ON in_flight_deliveries
    (account_id, last_status, created_at, event_id)
    WHERE (last_status < 200 OR last_status > 299 OR (last_status IS NULL AND last_error IS NOT NULL));
CREATE INDEX in_flight_deliveries_answer_class ON in_flight_deliveries (account_id,
    (CASE WHEN last_status IS NOT NULL THEN last_status / 100
          WHEN last_error LIKE 'timed out%' THEN -1 ELSE 0 END),
    created_at, event_id)
    WHERE (last_status < 200 OR last_status > 299 OR (last_status IS NULL AND last_error IS NOT NULL));
