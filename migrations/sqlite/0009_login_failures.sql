-- Failed sign-ins per email (known or not, so the answer reveals nothing),
-- shared by every node: each failure past a few free ones locks the email
-- for a growing time.
CREATE TABLE login_failures (
    email          TEXT PRIMARY KEY,
    failures       BIGINT NOT NULL,
    last_failed_at BIGINT NOT NULL,
    locked_until   BIGINT NOT NULL
);
