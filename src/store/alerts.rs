//! What the alert job asks: which endpoints crossed a tier, and the
//! conditional updates that make each alert fire once, on any node.

use sqlx::FromRow;

use super::{Endpoint, Pool, Result, Store};
use crate::clock::Timestamp;

/// An endpoint whose oldest waiting delivery gives up soon.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct ExpiringSoon {
    pub endpoint_id: String,
    pub oldest_give_up_at: i64,
    pub waiting: i64,
}

/// Expirations of one endpoint not yet summarised.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct ExpiredSince {
    pub endpoint_id: String,
    pub expired: i64,
    pub last_at: i64,
}

/// A failed attempt's status and error.
type LastFailure = (Option<i64>, Option<String>);

/// What a failing alert says beside the endpoint's URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailingDetails {
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub oldest_give_up_at: Option<i64>,
    /// Newest first.
    pub last_events: Vec<String>,
}

impl Store {
    /// Endpoints failing for at least `older_than` whose tier is below `tier`.
    /// Active endpoints failing since `since` or earlier, below `tier`,
    /// that are failing now: an attempt failed at `recent` or later (one
    /// old 400 on a quiet endpoint is no failing endpoint). A paused one
    /// is told it is paused, not that we keep retrying.
    pub async fn failing_below_tier(
        &self,
        tier: i64,
        since: Timestamp,
        recent: Timestamp,
    ) -> Result<Vec<Endpoint>> {
        let sql = "SELECT * FROM endpoints e WHERE e.failing_since IS NOT NULL \
                   AND e.failing_since <= $1 AND e.alert_level < $2 AND e.state = 'active' \
                   AND EXISTS (SELECT 1 FROM attempts a WHERE a.endpoint_id = e.id \
                     AND a.started_at >= $3 AND a.classification <> 'delivered')";
        let eps = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(since.millis())
            .bind(tier)
            .bind(recent.millis())
            .fetch_all(p)
            .await)?;
        self.opened_all(eps)
    }

    /// What a failing alert says of the endpoint: its last failed answer,
    /// when its oldest waiting delivery gives up, and the latest events
    /// that failed (up to `n`, newest first, each once).
    pub async fn failing_details(&self, endpoint_id: &str, n: usize) -> Result<FailingDetails> {
        let last = "SELECT response_status, error FROM attempts \
                    WHERE endpoint_id = $1 AND classification <> 'delivered' \
                    ORDER BY started_at DESC LIMIT 1";
        let oldest = "SELECT min(give_up_at) FROM deliveries \
                      WHERE endpoint_id = $1 AND state IN ('pending', 'in_flight')";
        let events = "SELECT d.event_id FROM attempts a JOIN deliveries d ON d.id = a.delivery_id \
                      WHERE a.endpoint_id = $1 AND a.classification <> 'delivered' \
                      ORDER BY a.started_at DESC LIMIT $2";
        let limit = i64::try_from(n * 4).unwrap_or(i64::MAX);
        let (last, oldest, recent): (Option<LastFailure>, Option<i64>, Vec<String>) =
            on_pool!(self, |p| async {
                let last = sqlx::query_as(last)
                    .bind(endpoint_id)
                    .fetch_optional(p)
                    .await?;
                let oldest = sqlx::query_scalar(oldest)
                    .bind(endpoint_id)
                    .fetch_one(p)
                    .await?;
                let recent = sqlx::query_scalar(events)
                    .bind(endpoint_id)
                    .bind(limit)
                    .fetch_all(p)
                    .await?;
                Ok::<_, sqlx::Error>((last, oldest, recent))
            }
            .await)?;
        let mut last_events: Vec<String> = Vec::new();
        for id in recent {
            if last_events.len() < n && !last_events.contains(&id) {
                last_events.push(id);
            }
        }
        let (last_status, last_error) = last.unwrap_or((None, None));
        Ok(FailingDetails {
            last_status,
            last_error,
            oldest_give_up_at: oldest,
            last_events,
        })
    }

    /// Raises the tier; `true` for the one caller that did (it alerts).
    pub async fn raise_alert_level(&self, endpoint_id: &str, tier: i64) -> Result<bool> {
        let sql = "UPDATE endpoints SET alert_level = $1 WHERE id = $2 AND alert_level < $1";
        let n = on_pool!(self, |p| sqlx::query(sql)
            .bind(tier)
            .bind(endpoint_id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    pub async fn expiring_before(&self, deadline: Timestamp) -> Result<Vec<ExpiringSoon>> {
        // Each state through its own partial index, whatever the history.
        let sql = "SELECT endpoint_id, min(give_up_at) AS oldest_give_up_at, count(*) AS waiting \
                   FROM (SELECT endpoint_id, give_up_at FROM deliveries WHERE state = 'pending' \
                         UNION ALL \
                         SELECT endpoint_id, give_up_at FROM deliveries WHERE state = 'in_flight') w \
                   GROUP BY endpoint_id HAVING min(give_up_at) <= $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, ExpiringSoon>(sql)
            .bind(deadline.millis())
            .fetch_all(p)
            .await)?)
    }

    /// Records the expiry warning; `true` for the caller that should send
    /// it. Once per failing spell: during a long outage each expiry makes the
    /// next delivery the oldest, and warning again for each would be an
    /// alert per event. A success clears the mark.
    pub async fn mark_expiry_warned(&self, endpoint_id: &str, give_up_at: i64) -> Result<bool> {
        let sql = "UPDATE endpoints SET alert_expiry_for = $1 WHERE id = $2 \
                   AND alert_expiry_for IS NULL";
        let n = on_pool!(self, |p| sqlx::query(sql)
            .bind(give_up_at)
            .bind(endpoint_id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Endpoints with expirations after their last summary, the latest of
    /// which is older than `quiet_since` (the wave is over).
    pub async fn unsummarised_expiries(&self, quiet_since: Timestamp) -> Result<Vec<ExpiredSince>> {
        let sql = "SELECT d.endpoint_id, count(*) AS expired, max(d.finished_at) AS last_at \
                   FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id \
                   WHERE d.state = 'expired' AND d.finished_at > COALESCE(e.alert_summary_at, 0) \
                   GROUP BY d.endpoint_id HAVING max(d.finished_at) <= $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, ExpiredSince>(sql)
            .bind(quiet_since.millis())
            .fetch_all(p)
            .await)?)
    }

    /// The last `n` expirations after `after`: (event id, last status).
    pub async fn last_expired(
        &self,
        endpoint_id: &str,
        after: i64,
        n: i64,
    ) -> Result<Vec<(String, Option<i64>)>> {
        let sql = "SELECT event_id, last_status FROM deliveries WHERE endpoint_id = $1 \
                   AND state = 'expired' AND finished_at > $2 ORDER BY finished_at DESC, id DESC LIMIT $3";
        Ok(on_pool!(self, |p| sqlx::query_as(sql)
            .bind(endpoint_id)
            .bind(after)
            .bind(n)
            .fetch_all(p)
            .await)?)
    }

    /// Moves the summary mark; `true` for the caller that moved it.
    pub async fn mark_summarised(&self, endpoint_id: &str, up_to: i64) -> Result<bool> {
        let sql = "UPDATE endpoints SET alert_summary_at = $1 WHERE id = $2 \
                   AND (alert_summary_at IS NULL OR alert_summary_at < $1)";
        let n = on_pool!(self, |p| sqlx::query(sql)
            .bind(up_to)
            .bind(endpoint_id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }
}
