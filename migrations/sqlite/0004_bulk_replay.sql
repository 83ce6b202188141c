-- Bulk replays: each replayed delivery remembers which replay took it and
-- what it was before, so progress can be counted and a cancel can put the
-- not-yet-attempted rest back in the dead-letter queue.
ALTER TABLE deliveries ADD COLUMN replay_id TEXT;
ALTER TABLE deliveries ADD COLUMN replay_prev_state TEXT;
ALTER TABLE deliveries ADD COLUMN replay_from_seq BIGINT;
ALTER TABLE deliveries ADD COLUMN replay_prev_attempts BIGINT;
ALTER TABLE deliveries ADD COLUMN replay_prev_give_up_at BIGINT;
ALTER TABLE deliveries ADD COLUMN replay_prev_finished_at BIGINT;
ALTER TABLE deliveries ADD COLUMN replay_prev_error TEXT;
CREATE INDEX deliveries_replay ON deliveries (replay_id) WHERE replay_id IS NOT NULL;
ALTER TABLE replays ADD COLUMN status TEXT NOT NULL DEFAULT 'done';
ALTER TABLE replays ADD COLUMN window_ms BIGINT;
CREATE INDEX deliveries_finished ON deliveries (finished_at) WHERE finished_at IS NOT NULL;
-- (account_id, state, event_id) also answers the events list's state filter
-- with one probe per event.
CREATE INDEX deliveries_account_state ON deliveries (account_id, state, event_id);
