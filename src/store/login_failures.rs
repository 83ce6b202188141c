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

    /// Counts one failure and returns the count; a failure after a quiet
    /// `forget_after` starts the count again.
    pub async fn record_login_failure(
        &self,
        email: &str,
        now: Timestamp,
        forget_after: std::time::Duration,
        lock_for: impl Fn(i64) -> std::time::Duration,
    ) -> Result<i64> {
        let forget_before = now.minus(forget_after).millis();
        let sql = "INSERT INTO login_failures (email, failures, last_failed_at, locked_until) \
                   VALUES ($1, 1, $2, 0) \
                   ON CONFLICT (email) DO UPDATE SET \
                     failures = CASE WHEN login_failures.last_failed_at < $3 THEN 1 \
                                     ELSE login_failures.failures + 1 END, \
                     last_failed_at = excluded.last_failed_at \
                   RETURNING failures";
        let failures: i64 = on_writer!(self, |p| sqlx::query_scalar(sql)
            .bind(email)
            .bind(now.millis())
            .bind(forget_before)
            .fetch_one(p)
            .await)?;
        let lock = lock_for(failures);
        if !lock.is_zero() {
            let sql = "UPDATE login_failures SET locked_until = $1 WHERE email = $2";
            on_writer!(self, |p| sqlx::query(sql)
                .bind(now.plus(lock).millis())
                .bind(email)
                .execute(p)
                .await
                .map(|_| ()))?;
        }
        Ok(failures)
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
