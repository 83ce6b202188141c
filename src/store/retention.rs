//! Retention (SPEC §6): finished deliveries older than the cutoff go, with
//! their attempts, and events that are left without deliveries go too.
//! Pending and in-flight work is never touched.

use super::{Attempt, Delivery, Event, Pool, Result, Store, StoreError};
use crate::clock::Timestamp;

/// One batch of expired history, read before it is deleted so it can be
/// archived first.
#[derive(Debug, Default)]
pub struct OldHistory {
    pub deliveries: Vec<(Delivery, Event, Vec<Attempt>)>,
}

impl Store {
    /// Up to `limit` terminal deliveries finished before `cutoff`, each with
    /// its event and attempts.
    pub async fn old_history(&self, cutoff: Timestamp, limit: i64) -> Result<OldHistory> {
        let sql = "SELECT * FROM deliveries WHERE finished_at IS NOT NULL AND finished_at < $1 \
                   AND state IN ('delivered', 'failed', 'expired') ORDER BY finished_at, id LIMIT $2";
        let deliveries = on_pool!(self, |p| sqlx::query_as::<_, Delivery>(sql)
            .bind(cutoff.millis())
            .bind(limit)
            .fetch_all(p)
            .await)?;
        let mut out = OldHistory::default();
        for d in deliveries {
            let event = self.event_of(&d).await?;
            let attempts = self.attempts_of_delivery(&d.id).await?;
            out.deliveries.push((d, event, attempts));
        }
        Ok(out)
    }

    /// Deletes these deliveries and their attempts if they are still
    /// finished, then their events if no delivery is left. One transaction
    /// per batch. Returns (deliveries, events) deleted.
    pub async fn delete_history(&self, batch: &OldHistory) -> Result<(u64, u64)> {
        // Unchanged since it was read (a resend in between makes it new work).
        let delete_delivery = "DELETE FROM deliveries WHERE id = $1 AND updated_at = $2 \
                               AND state IN ('delivered', 'failed', 'expired')";
        // No cascade on Postgres, where deliveries are partitioned (migration 0022).
        let delete_attempts = "DELETE FROM attempts WHERE delivery_id = $1";
        let delete_event = "DELETE FROM events WHERE account_id = $1 AND id = $2 \
                            AND NOT EXISTS (SELECT 1 FROM deliveries d \
                              WHERE d.account_id = events.account_id AND d.event_id = events.id)";
        on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            let (mut deliveries, mut events) = (0, 0);
            for (d, e, _) in &batch.deliveries {
                let gone = sqlx::query(delete_delivery)
                    .bind(&d.id)
                    .bind(d.updated_at)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if gone > 0 {
                    sqlx::query(delete_attempts)
                        .bind(&d.id)
                        .execute(&mut *tx)
                        .await?;
                }
                deliveries += gone;
                events += sqlx::query(delete_event)
                    .bind(&e.account_id)
                    .bind(&e.id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
            tx.commit().await?;
            Ok::<_, StoreError>((deliveries, events))
        })
    }

    /// Events older than the cutoff that never had a delivery (no endpoint
    /// wanted them), up to `limit` at a time. Returns how many went.
    pub async fn delete_orphan_events(&self, cutoff: Timestamp, limit: i64) -> Result<u64> {
        let sql = "DELETE FROM events WHERE id IN ( \
                     SELECT e.id FROM events e WHERE e.created_at < $1 \
                     AND NOT EXISTS (SELECT 1 FROM deliveries d \
                       WHERE d.account_id = e.account_id AND d.event_id = e.id) \
                     LIMIT $2) \
                   AND created_at < $1 \
                   AND NOT EXISTS (SELECT 1 FROM deliveries d \
                     WHERE d.account_id = events.account_id AND d.event_id = events.id)";
        Ok(on_pool!(self, |p| sqlx::query(sql)
            .bind(cutoff.millis())
            .bind(limit)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?)
    }
}
