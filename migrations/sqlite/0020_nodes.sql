-- The nodes serving this installation, for `dakghar status`: each writes
-- its row at start and every few seconds after, and the deliveries it
-- holds carry its id at the front of their claim token.
CREATE TABLE nodes (
    id          TEXT PRIMARY KEY,
    role        TEXT NOT NULL,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    version     TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    seen_at     INTEGER NOT NULL
);
