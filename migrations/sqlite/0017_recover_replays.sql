-- A customer's recovery of one endpoint's failures is a replay of its own
-- kind in the audit log. SQLite cannot change a CHECK in place: the table
-- is rebuilt with the same rows.
CREATE TABLE replays_new (
    id          TEXT PRIMARY KEY,
    account_id  TEXT REFERENCES accounts(id) ON DELETE SET NULL,
    actor       TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('single', 'bulk', 'recover')),
    criteria    TEXT NOT NULL,
    count       INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    status      TEXT NOT NULL DEFAULT 'done',
    window_ms   BIGINT
);
INSERT INTO replays_new (id, account_id, actor, kind, criteria, count, created_at, status, window_ms)
    SELECT id, account_id, actor, kind, criteria, count, created_at, status, window_ms FROM replays;
DROP TABLE replays;
ALTER TABLE replays_new RENAME TO replays;
CREATE INDEX replays_created ON replays (created_at DESC);
