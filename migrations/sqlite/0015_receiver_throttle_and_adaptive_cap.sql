-- Respecting receivers (SPEC §11). A 429 or 503 throttles the whole
-- endpoint: no claim takes its work before `throttled_until`, and the
-- deliveries come back spread over a short window after it
-- (`throttled_at` gives the wait's length). `throttle_streak` counts
-- throttles in a row, for the backoff when no Retry-After came.
ALTER TABLE endpoints ADD COLUMN throttled_until BIGINT;
ALTER TABLE endpoints ADD COLUMN throttled_at BIGINT;
ALTER TABLE endpoints ADD COLUMN throttle_status BIGINT;
ALTER TABLE endpoints ADD COLUMN throttle_streak BIGINT NOT NULL DEFAULT 0;
-- The adaptive in-flight cap under `max_in_flight`: NULL is at the
-- ceiling. It halves on a 429, 503 or timeout (once per attempt started
-- after the last cut, `cap_cut_at`) and grows by one after as many
-- successes in a row as the cap (`success_run`).
ALTER TABLE endpoints ADD COLUMN adaptive_cap BIGINT;
ALTER TABLE endpoints ADD COLUMN cap_cut_at BIGINT;
ALTER TABLE endpoints ADD COLUMN success_run BIGINT NOT NULL DEFAULT 0;
-- The receiver an endpoint's URL names, as `host:port`: a cap on
-- concurrent attempts per receiver holds across endpoints and accounts.
-- Written by Dakghar from the URL (existing rows at start-up).
ALTER TABLE endpoints ADD COLUMN host TEXT;
CREATE INDEX endpoints_host ON endpoints (host);
-- An endpoint's own retry policy (chapter 004), NULL for the
-- installation's: `exponential|linear|fixed`, and a status list as
-- `--retry-statuses` takes it.
ALTER TABLE endpoints ADD COLUMN retry_strategy TEXT;
ALTER TABLE endpoints ADD COLUMN retry_statuses TEXT;
-- When the endpoint was paused, so a resume can say how much of the
-- backlog expired meanwhile.
ALTER TABLE endpoints ADD COLUMN paused_at BIGINT;
