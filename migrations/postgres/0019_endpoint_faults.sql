-- A fault on Dakghar's side that keeps an endpoint's deliveries from
-- being sent (a stored secret that will not open, say): what it is, since
-- when, and how many times in a row, so its deliveries back off and the
-- endpoint page says so instead of the engine claiming them in a loop.
ALTER TABLE endpoints ADD COLUMN fault TEXT;
ALTER TABLE endpoints ADD COLUMN fault_at BIGINT;
ALTER TABLE endpoints ADD COLUMN fault_streak BIGINT NOT NULL DEFAULT 0;
