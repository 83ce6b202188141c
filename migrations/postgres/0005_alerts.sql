-- Alert tiers per endpoint (never per event): how far the "failing" alerts
-- have gone (1: failing 1 h, 2: failing 24 h), which oldest pending
-- delivery we warned about before it expires, and up to when expirations
-- have been summarised. A success resets the failing tier.
ALTER TABLE endpoints ADD COLUMN alert_level BIGINT NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN alert_expiry_for BIGINT;
ALTER TABLE endpoints ADD COLUMN alert_summary_at BIGINT;
-- The outbox's sending state: retried with backoff when SMTP fails.
ALTER TABLE notifications ADD COLUMN send_attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE notifications ADD COLUMN next_send_at BIGINT;
ALTER TABLE notifications ADD COLUMN last_send_error TEXT;
