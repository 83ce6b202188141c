-- Dakghar schema (SQLite). Times are Unix milliseconds from the application's clock.

CREATE TABLE accounts (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
);

CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    account_id    TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    email         TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('member', 'admin')),
    created_at    INTEGER NOT NULL
);

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    prefix      TEXT NOT NULL,
    key_hash    TEXT NOT NULL UNIQUE,
    is_admin    BOOLEAN NOT NULL DEFAULT FALSE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
CREATE INDEX api_keys_account ON api_keys (account_id);

CREATE TABLE endpoints (
    id                         TEXT PRIMARY KEY,
    account_id                 TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    url                        TEXT NOT NULL,
    description                TEXT NOT NULL DEFAULT '',
    event_types                TEXT NOT NULL DEFAULT '[]',
    secret                     TEXT NOT NULL,
    previous_secret            TEXT,
    previous_secret_expires_at INTEGER,
    state                      TEXT NOT NULL DEFAULT 'active'
                               CHECK (state IN ('active', 'paused', 'disabled')),
    pause_reason               TEXT,
    rate_limit_per_sec         INTEGER,
    max_in_flight              INTEGER NOT NULL DEFAULT 10 CHECK (max_in_flight > 0),
    failure_streak             INTEGER NOT NULL DEFAULT 0,
    transient_streak           INTEGER NOT NULL DEFAULT 0,
    failing_since              INTEGER,
    last_success_at            INTEGER,
    circuit_state              TEXT NOT NULL DEFAULT 'closed'
                               CHECK (circuit_state IN ('closed', 'open', 'half_open')),
    circuit_open_until         INTEGER,
    circuit_cooldown_ms        INTEGER NOT NULL DEFAULT 0,
    created_at                 INTEGER NOT NULL,
    updated_at                 INTEGER NOT NULL
);
CREATE INDEX endpoints_account ON endpoints (account_id, created_at DESC);

CREATE TABLE events (
    account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    id          TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    payload     BLOB NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (account_id, id)
);
CREATE INDEX events_account_created ON events (account_id, created_at DESC, id DESC);

CREATE TABLE deliveries (
    id              TEXT PRIMARY KEY,
    account_id      TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    endpoint_id     TEXT NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    state           TEXT NOT NULL
                    CHECK (state IN ('pending', 'in_flight', 'delivered', 'failed', 'expired')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    attempt_seq     INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    give_up_at      INTEGER NOT NULL,
    claimed_at      INTEGER,
    claim_token     TEXT,
    lease_until     INTEGER,
    last_status     INTEGER,
    last_response   BLOB,
    last_error      TEXT,
    finished_at     INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    FOREIGN KEY (account_id, event_id) REFERENCES events(account_id, id) ON DELETE CASCADE,
    UNIQUE (account_id, event_id, endpoint_id),
    -- terminal rows carry their finish time, live rows never do
    CHECK ((state IN ('delivered', 'failed', 'expired')) = (finished_at IS NOT NULL)),
    CHECK ((state = 'in_flight') = (lease_until IS NOT NULL))
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE state = 'in_flight';
CREATE INDEX deliveries_dead_letter ON deliveries (updated_at DESC) WHERE state IN ('failed', 'expired');
CREATE INDEX deliveries_endpoint_created ON deliveries (endpoint_id, created_at DESC);

CREATE TABLE attempts (
    delivery_id      TEXT NOT NULL REFERENCES deliveries(id) ON DELETE CASCADE,
    attempt          INTEGER NOT NULL,
    started_at       INTEGER NOT NULL,
    duration_ms      INTEGER NOT NULL,
    request_headers  TEXT NOT NULL,
    response_status  INTEGER,
    response_headers TEXT,
    response_body    BLOB,
    error            TEXT,
    classification   TEXT NOT NULL,
    PRIMARY KEY (delivery_id, attempt)
);
CREATE INDEX attempts_started ON attempts (started_at);

CREATE TABLE replays (
    id          TEXT PRIMARY KEY,
    account_id  TEXT REFERENCES accounts(id) ON DELETE SET NULL,
    actor       TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('single', 'bulk')),
    criteria    TEXT NOT NULL,
    count       INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX replays_created ON replays (created_at DESC);

CREATE TABLE notifications (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    endpoint_id TEXT REFERENCES endpoints(id) ON DELETE SET NULL,
    kind        TEXT NOT NULL,
    subject     TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    sent_at     INTEGER
);
CREATE INDEX notifications_account ON notifications (account_id, created_at DESC);
CREATE INDEX notifications_unsent ON notifications (created_at) WHERE sent_at IS NULL;
