-- "At most N per window" counters shared by every node: per-endpoint
-- delivery starts (per second) and resends (per minute).
CREATE TABLE rate_windows (
    key          TEXT PRIMARY KEY,
    window_start BIGINT NOT NULL,
    used         BIGINT NOT NULL
);
