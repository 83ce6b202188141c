//! Endpoint health as the dashboard shows it: success rates, latency,
//! attempts per hour, recent errors and the waiting queue. Every query is
//! bounded by the `attempts (endpoint_id, started_at)` index.

use std::collections::HashMap;

use sqlx::FromRow;

use super::{Attempt, Pool, Result, Store};
use crate::clock::Timestamp;

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// Attempts in a time window.
#[derive(Debug, Clone, Default, PartialEq, Eq, FromRow)]
pub struct WindowStats {
    pub attempts: i64,
    pub delivered: i64,
    pub avg_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct LastAttempt {
    pub endpoint_id: String,
    pub started_at: i64,
    pub response_status: Option<i64>,
    pub classification: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub day: WindowStats,
    pub week: WindowStats,
    pub p95_ms_day: Option<i64>,
    /// 24 hourly buckets, oldest first, the current hour last:
    /// (hour start, delivered, not delivered).
    pub hourly: Vec<(i64, i64, i64)>,
    /// Attempt durations per hour of those 24, oldest first.
    pub latency_hourly: Vec<Latency>,
    /// Per day of the last 7 (UTC days, today last).
    pub latency_daily: Vec<Latency>,
    /// Newest first.
    pub last_errors: Vec<Attempt>,
    pub pending: i64,
    pub in_flight: i64,
}

/// Nearest-rank percentiles of the attempts that started in a bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    pub start: i64,
    pub p50_ms: Option<i64>,
    pub p95_ms: Option<i64>,
}

#[derive(FromRow)]
struct StatsRow {
    endpoint_id: String,
    attempts: i64,
    delivered: i64,
    avg_ms: Option<i64>,
}

const STATS: &str = "count(*) AS attempts, \
     count(CASE WHEN classification = 'delivered' THEN 1 END) AS delivered, \
     CAST(avg(duration_ms) AS BIGINT) AS avg_ms";

impl Store {
    /// Per endpoint of the account, attempts since `since`.
    pub async fn account_endpoint_stats(
        &self,
        account_id: &str,
        since: Timestamp,
    ) -> Result<HashMap<String, WindowStats>> {
        let sql = format!(
            "SELECT endpoint_id, {STATS} FROM attempts \
             WHERE endpoint_id IN (SELECT id FROM endpoints WHERE account_id = $1) \
               AND started_at >= $2 GROUP BY endpoint_id"
        );
        let rows = on_pool!(self, |p| sqlx::query_as::<_, StatsRow>(&sql)
            .bind(account_id)
            .bind(since.millis())
            .fetch_all(p)
            .await)?;
        Ok(rows
            .into_iter()
            .map(|r| {
                (
                    r.endpoint_id,
                    WindowStats {
                        attempts: r.attempts,
                        delivered: r.delivered,
                        avg_ms: r.avg_ms,
                    },
                )
            })
            .collect())
    }

    /// The latest attempt of each of the account's endpoints, at any time.
    pub async fn last_attempts(&self, account_id: &str) -> Result<HashMap<String, LastAttempt>> {
        let sql = "SELECT a.endpoint_id, a.started_at, a.response_status, a.classification \
                   FROM endpoints e JOIN attempts a ON a.endpoint_id = e.id \
                   WHERE e.account_id = $1 AND a.started_at = \
                     (SELECT max(started_at) FROM attempts l WHERE l.endpoint_id = e.id)";
        let rows = on_pool!(self, |p| sqlx::query_as::<_, LastAttempt>(sql)
            .bind(account_id)
            .fetch_all(p)
            .await)?;
        Ok(rows
            .into_iter()
            .map(|r| (r.endpoint_id.clone(), r))
            .collect())
    }

    pub async fn endpoint_health(&self, endpoint_id: &str, now: Timestamp) -> Result<Health> {
        let day_ago = Timestamp(now.millis() - 24 * HOUR_MS);
        let day = self.window_stats(endpoint_id, day_ago).await?;
        let week = self
            .window_stats(endpoint_id, Timestamp(now.millis() - 7 * 24 * HOUR_MS))
            .await?;
        let p95_ms_day = self.p95(endpoint_id, day_ago, day.attempts).await?;
        let hourly = self.hourly(endpoint_id, now).await?;
        let this_hour = now.millis().div_euclid(HOUR_MS) * HOUR_MS;
        let latency_hourly = self
            .latency(endpoint_id, this_hour - 23 * HOUR_MS, HOUR_MS, 24)
            .await?;
        let today = now.millis().div_euclid(DAY_MS) * DAY_MS;
        let latency_daily = self
            .latency(endpoint_id, today - 6 * DAY_MS, DAY_MS, 7)
            .await?;
        let errors =
            "SELECT * FROM attempts WHERE endpoint_id = $1 AND classification <> 'delivered' \
                      ORDER BY started_at DESC LIMIT 5";
        let last_errors = on_pool!(self, |p| sqlx::query_as::<_, Attempt>(errors)
            .bind(endpoint_id)
            .fetch_all(p)
            .await)?;
        // A count per state, each through that state's partial index.
        let queue = "SELECT (SELECT count(*) FROM deliveries \
                               WHERE endpoint_id = $1 AND state = 'pending'), \
                            (SELECT count(*) FROM deliveries \
                               WHERE endpoint_id = $1 AND state = 'in_flight')";
        let (pending, in_flight): (i64, i64) = on_pool!(self, |p| sqlx::query_as(queue)
            .bind(endpoint_id)
            .fetch_one(p)
            .await)?;
        Ok(Health {
            day,
            week,
            p95_ms_day,
            hourly,
            latency_hourly,
            latency_daily,
            last_errors,
            pending,
            in_flight,
        })
    }

    async fn window_stats(&self, endpoint_id: &str, since: Timestamp) -> Result<WindowStats> {
        let sql =
            format!("SELECT {STATS} FROM attempts WHERE endpoint_id = $1 AND started_at >= $2");
        Ok(on_pool!(self, |p| sqlx::query_as::<_, WindowStats>(&sql)
            .bind(endpoint_id)
            .bind(since.millis())
            .fetch_one(p)
            .await)?)
    }

    /// The 95th percentile duration (nearest rank) of `count` attempts.
    async fn p95(&self, endpoint_id: &str, since: Timestamp, count: i64) -> Result<Option<i64>> {
        if count == 0 {
            return Ok(None);
        }
        let rank = (count * 95 + 99) / 100;
        let sql = "SELECT duration_ms FROM attempts WHERE endpoint_id = $1 AND started_at >= $2 \
                   ORDER BY duration_ms LIMIT 1 OFFSET $3";
        Ok(on_pool!(self, |p| sqlx::query_scalar::<_, i64>(sql)
            .bind(endpoint_id)
            .bind(since.millis())
            .bind(rank - 1)
            .fetch_optional(p)
            .await)?)
    }

    async fn hourly(&self, endpoint_id: &str, now: Timestamp) -> Result<Vec<(i64, i64, i64)>> {
        let first = now.millis().div_euclid(HOUR_MS) * HOUR_MS - 23 * HOUR_MS;
        let sql = "SELECT (started_at - $2) / $3 AS bucket, \
                          count(CASE WHEN classification = 'delivered' THEN 1 END), \
                          count(CASE WHEN classification <> 'delivered' THEN 1 END) \
                   FROM attempts WHERE endpoint_id = $1 AND started_at >= $2 \
                   GROUP BY bucket";
        let rows: Vec<(i64, i64, i64)> = on_pool!(self, |p| sqlx::query_as(sql)
            .bind(endpoint_id)
            .bind(first)
            .bind(HOUR_MS)
            .fetch_all(p)
            .await)?;
        let mut hours: Vec<(i64, i64, i64)> =
            (0..24).map(|h| (first + h * HOUR_MS, 0, 0)).collect();
        for (bucket, ok, failed) in rows {
            if let Some(slot) = usize::try_from(bucket).ok().and_then(|b| hours.get_mut(b)) {
                slot.1 += ok;
                slot.2 += failed;
            }
        }
        Ok(hours)
    }

    /// p50 and p95 of each of `buckets` spans of `span` ms from `first`,
    /// exact (nearest rank): each bucket's attempts ranked by duration,
    /// the two ranks kept.
    async fn latency(
        &self,
        endpoint_id: &str,
        first: i64,
        span: i64,
        buckets: i64,
    ) -> Result<Vec<Latency>> {
        let sql = "SELECT bucket, rn, n, duration_ms FROM ( \
                     SELECT (started_at - $2) / $3 AS bucket, duration_ms, \
                            ROW_NUMBER() OVER (PARTITION BY (started_at - $2) / $3 \
                                               ORDER BY duration_ms) AS rn, \
                            COUNT(*) OVER (PARTITION BY (started_at - $2) / $3) AS n \
                     FROM attempts WHERE endpoint_id = $1 AND started_at >= $2) ranked \
                   WHERE rn = (n * 50 + 99) / 100 OR rn = (n * 95 + 99) / 100";
        let rows: Vec<(i64, i64, i64, i64)> = on_pool!(self, |p| sqlx::query_as(sql)
            .bind(endpoint_id)
            .bind(first)
            .bind(span)
            .fetch_all(p)
            .await)?;
        let mut out: Vec<Latency> = (0..buckets)
            .map(|b| Latency {
                start: first + b * span,
                ..Latency::default()
            })
            .collect();
        for (bucket, rank, n, ms) in rows {
            let Some(slot) = usize::try_from(bucket).ok().and_then(|b| out.get_mut(b)) else {
                continue;
            };
            // With one or two attempts both ranks are the same row.
            if rank == (n * 50 + 99) / 100 {
                slot.p50_ms = Some(ms);
            }
            if rank == (n * 95 + 99) / 100 {
                slot.p95_ms = Some(ms);
            }
        }
        Ok(out)
    }
}
