//! Failed sign-ins per email, in the database so every node throttles the
//! same email the same way. The policy (how long a lock lasts) lives in
//! `auth::throttle`; this module only counts.

use super::{Pool, Result, Store};
use crate::clock::Timestamp;

impl Store {
    /// When the email's lock ends, if it is locked at `now`.
    pub async fn login_locked_until(
        &self,
        email: &str,
        now: Timestamp,
    ) -> Result<Option<Timestamp>> {
        let sql = "SELECT locked_until FROM login_failures WHERE email = $1 AND locked_until > $2";
        let until: Option<i64> = on_pool!(self, |p| sqlx::query_scalar(sql)
            .bind(email)
            .bind(now.millis())
            .fetch_optional(p)
            .await)?;
        Ok(until.map(Timestamp))
    }

    /// Counts the attempt about to be made as a failure, and sets the lock
    /// that count earns, in one statement, unless the email is locked at
    /// `now`: `Ok(Some(count))` may go on and check the password (a right
    /// one clears the count), `Ok(None)` is locked. Counting before the
    /// check, in one statement, is what keeps concurrent attempts from all
    /// passing a check made before any was counted. A failure after a
    /// quiet `forget_after` starts the count again.
    pub async fn reserve_login_attempt(
        &self,
        email: &str,
        now: Timestamp,
        forget_after: std::time::Duration,
        lock_for: impl Fn(i64) -> std::time::Duration,
    ) -> Result<Option<i64>> {
        let forget_before = now.minus(forget_after).millis();
        // The lock each count earns, as SQL: the policy stays in
        // auth::throttle, and a count past the table gets its last lock.
        const TABLE: i64 = 64;
        let arms: String = (1..TABLE)
            .map(|n| format!(" WHEN {n} THEN {}", lock_for(n).as_millis()))
            .collect();
        let lock = |count: &str| {
            format!(
                "(CASE {count}{arms} ELSE {} END)",
                lock_for(TABLE).as_millis()
            )
        };
        let next = "(CASE WHEN login_failures.last_failed_at < $3 THEN 1 \
                     ELSE login_failures.failures + 1 END)";
        let sql = format!(
            "INSERT INTO login_failures (email, failures, last_failed_at, locked_until) \
             VALUES ($1, 1, $2, $2 + {first}) \
             ON CONFLICT (email) DO UPDATE SET \
               failures = {next}, \
               last_failed_at = excluded.last_failed_at, \
               locked_until = excluded.last_failed_at + {then} \
             WHERE login_failures.locked_until <= excluded.last_failed_at \
             RETURNING failures",
            first = lock("1"),
            then = lock(next),
        );
        let count: Option<i64> = on_writer!(self, |p| sqlx::query_scalar(&sql)
            .bind(email)
            .bind(now.millis())
            .bind(forget_before)
            .fetch_optional(p)
            .await)?;
        Ok(count)
    }

    /// Forgets sign-in failures that no longer count and whose lock has
    /// passed: unknown emails would otherwise stay forever. Returns how many.
    pub async fn prune_login_failures(
        &self,
        now: Timestamp,
        forget_after: std::time::Duration,
    ) -> Result<u64> {
        let sql = "DELETE FROM login_failures WHERE last_failed_at < $1 AND locked_until <= $2";
        Ok(on_writer!(self, |p| sqlx::query(sql)
            .bind(now.minus(forget_after).millis())
            .bind(now.millis())
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?)
    }

    pub async fn clear_login_failures(&self, email: &str) -> Result<()> {
        let sql = "DELETE FROM login_failures WHERE email = $1";
        on_writer!(self, |p| sqlx::query(sql)
            .bind(email)
            .execute(p)
            .await
            .map(|_| ()))?;
        Ok(())
    }
}
