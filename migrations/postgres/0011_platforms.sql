-- Platforms onboard their customers (SPEC §10).

-- The platform's own id for the customer an account stands for.
ALTER TABLE accounts ADD COLUMN external_id TEXT;
CREATE UNIQUE INDEX accounts_external_id ON accounts (external_id) WHERE external_id IS NOT NULL;

-- A user's role in their account; installation admins keep users.role.
-- Users from before roles keep everything they could do: owner.
ALTER TABLE users ADD COLUMN account_role TEXT NOT NULL DEFAULT 'owner'
    CHECK (account_role IN ('owner', 'developer', 'viewer'));
-- Bumped to end every session of the user (password reset).
ALTER TABLE users ADD COLUMN session_epoch BIGINT NOT NULL DEFAULT 0;

-- Keys that act on any account, for the platform's backend.
CREATE TABLE platform_keys (
    id          TEXT PRIMARY KEY,
    prefix      TEXT NOT NULL,
    key_hash    TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);

-- Single-use links: invitations (72 h), password resets (30 min) and
-- portal links (their ttl). Only a hash of the secret part is kept.
CREATE TABLE access_links (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('invitation', 'password_reset', 'portal')),
    secret_hash TEXT NOT NULL,
    account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    user_id     TEXT REFERENCES users(id) ON DELETE CASCADE,
    email       TEXT,
    role        TEXT CHECK (role IN ('owner', 'developer', 'viewer')),
    return_url  TEXT,
    created_by  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT
);
CREATE INDEX access_links_account ON access_links (account_id, kind, created_at DESC);

-- A browser signed in through a portal link: an account and a role until
-- the link's ttl, no user.
CREATE TABLE portal_sessions (
    id_hash     TEXT PRIMARY KEY,
    link_id     TEXT NOT NULL,
    account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    role        TEXT NOT NULL CHECK (role IN ('developer', 'viewer')),
    return_url  TEXT,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX portal_sessions_expiry ON portal_sessions (expires_at);

-- A notification for one person (an invitation, a password reset) rather
-- than every user of the account; it never shows on the account's page.
ALTER TABLE notifications ADD COLUMN recipient TEXT;
