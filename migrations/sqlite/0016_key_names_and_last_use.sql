-- A key's name says what it is for ("billing producer"); `last_used_at`
-- says whether anything still uses it before it is revoked. Written at
-- most once a minute per key, by the node that authenticated it.
ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN last_used_at BIGINT;
ALTER TABLE platform_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE platform_keys ADD COLUMN last_used_at BIGINT;
