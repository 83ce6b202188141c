//! "At most N per window" counters kept in the database, so every node
//! shares one budget: per-endpoint delivery starts (per second) and resends
//! (per minute). Windows follow the code's clock, so tests move them.

use std::time::Duration;

use super::{Pool, Result, Store};
use crate::clock::Timestamp;

impl Store {
    /// Counts one use of `key` if it fits under `limit` in the current
    /// window; otherwise counts nothing and returns when the next window opens.
    pub async fn take_rate_slot(
        &self,
        key: &str,
        window: Duration,
        limit: i64,
        now: Timestamp,
    ) -> Result<Option<Timestamp>> {
        let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX).max(1);
        let start = now.millis().div_euclid(window_ms).saturating_mul(window_ms);
        // One atomic upsert: a new window resets the count, a full one
        // matches no row and so changes nothing.
        let sql = "INSERT INTO rate_windows (key, window_start, used) VALUES ($1, $2, 1) \
                   ON CONFLICT (key) DO UPDATE SET \
                     used = CASE WHEN rate_windows.window_start = excluded.window_start \
                                 THEN rate_windows.used + 1 ELSE 1 END, \
                     window_start = excluded.window_start \
                   WHERE rate_windows.window_start <> excluded.window_start \
                      OR rate_windows.used < $3";
        let taken = on_writer!(self, |p| sqlx::query(sql)
            .bind(key)
            .bind(start)
            .bind(limit)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok((taken == 0).then(|| Timestamp(start.saturating_add(window_ms))))
    }
}
