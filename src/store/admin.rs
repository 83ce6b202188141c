//! The installation at a glance for admins: per-account queues and dead
//! letters, and producer-wide delivery and dead-letter rates.

use sqlx::FromRow;

use super::{Pool, Result, Store};
use crate::clock::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct AccountOverview {
    pub id: String,
    pub name: String,
    pub queued: i64,
    pub dead_letters: i64,
    pub failing_endpoints: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlobalRates {
    pub attempts: i64,
    pub delivered_attempts: i64,
    pub finished: i64,
    pub dead_lettered: i64,
}

/// What `/metrics` samples at scrape time. Both counts use the partial
/// indexes on pending and in-flight rows, so they stay cheap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueGauges {
    pub pending: i64,
    pub in_flight: i64,
    pub circuits_open: i64,
    /// Endpoints a 429/503 holds now.
    pub throttled: i64,
    /// Endpoints whose adaptive in-flight cap is below `max_in_flight`.
    pub capped: i64,
}

impl Store {
    pub async fn queue_gauges(&self, now: Timestamp) -> Result<QueueGauges> {
        let sql = "SELECT (SELECT count(*) FROM deliveries WHERE state = 'pending'), \
                          (SELECT count(*) FROM deliveries WHERE state = 'in_flight'), \
                          (SELECT count(*) FROM endpoints WHERE circuit_state = 'open'), \
                          (SELECT count(*) FROM endpoints WHERE throttled_until > $1), \
                          (SELECT count(*) FROM endpoints \
                             WHERE adaptive_cap IS NOT NULL AND adaptive_cap < max_in_flight)";
        let (pending, in_flight, circuits_open, throttled, capped): (i64, i64, i64, i64, i64) =
            on_pool!(self, |p| sqlx::query_as(sql)
                .bind(now.millis())
                .fetch_one(p)
                .await)?;
        Ok(QueueGauges {
            pending,
            in_flight,
            circuits_open,
            throttled,
            capped,
        })
    }

    pub async fn accounts_overview(&self) -> Result<Vec<AccountOverview>> {
        let sql = "SELECT a.id, a.name, \
             (SELECT count(*) FROM deliveries d WHERE d.account_id = a.id \
                AND d.state IN ('pending', 'in_flight')) AS queued, \
             (SELECT count(*) FROM deliveries d WHERE d.account_id = a.id \
                AND d.state IN ('failed', 'expired')) AS dead_letters, \
             (SELECT count(*) FROM endpoints e WHERE e.account_id = a.id \
                AND (e.state = 'paused' OR e.failing_since IS NOT NULL)) AS failing_endpoints \
             FROM accounts a ORDER BY a.name, a.id";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, AccountOverview>(
            sql
        )
        .fetch_all(p)
        .await)?)
    }

    pub async fn global_rates(&self, since: Timestamp) -> Result<GlobalRates> {
        let attempts = "SELECT count(*), count(CASE WHEN classification = 'delivered' THEN 1 END) \
                        FROM attempts WHERE started_at >= $1";
        let finished =
            "SELECT count(*), count(CASE WHEN state IN ('failed', 'expired') THEN 1 END) \
                        FROM deliveries WHERE finished_at >= $1";
        let (attempts, delivered_attempts): (i64, i64) =
            on_pool!(self, |p| sqlx::query_as(attempts)
                .bind(since.millis())
                .fetch_one(p)
                .await)?;
        let (finished, dead_lettered): (i64, i64) = on_pool!(self, |p| sqlx::query_as(finished)
            .bind(since.millis())
            .fetch_one(p)
            .await)?;
        Ok(GlobalRates {
            attempts,
            delivered_attempts,
            finished,
            dead_lettered,
        })
    }
}
