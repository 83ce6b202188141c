//! Reading events for the API and dashboard, resending deliveries, and the
//! notification outbox and replay audit log.

use std::collections::HashMap;

use super::{
    claim_held, placeholders, Delivery, Event, Notification, Pool, Replay, Result, Store,
    StoreError,
};
use crate::{clock::Timestamp, ids};

#[derive(Debug, Default, Clone)]
pub struct EventFilter {
    /// Events with at least one delivery in this state.
    pub state: Option<String>,
    pub event_type: Option<String>,
    /// Events with a delivery to this endpoint.
    pub endpoint_id: Option<String>,
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
    /// Continue after this (created_at, id), newest first.
    pub after: Option<(i64, String)>,
    /// Exactly this event id.
    pub id: Option<String>,
}

#[derive(Debug)]
pub struct EventPage {
    pub events: Vec<(Event, Vec<Delivery>)>,
    /// Pass back as `after` for the next page; `None` on the last page.
    pub next: Option<(i64, String)>,
}

impl Store {
    /// Newest first, keyset-paginated on (created_at, id): no OFFSET, no COUNT.
    pub async fn list_events(
        &self,
        account_id: &str,
        filter: &EventFilter,
        limit: i64,
    ) -> Result<EventPage> {
        // $1 account, $2 type, $3/$4 time range, $5/$6 the cursor, $7 state,
        // $8 endpoint, $10 event id. The endpoint test is a scalar probe of
        // the (account, event, endpoint) key: as EXISTS, Postgres may hash
        // every delivery of the endpoint first.
        let endpoint_probe = "AND ($8 IS NULL OR (SELECT 1 FROM deliveries d8 \
                                WHERE d8.account_id = e.account_id AND d8.event_id = e.id \
                                  AND d8.endpoint_id = $8) = 1)";
        let rest = "AND ($2 IS NULL OR e.event_type = $2) AND ($10 IS NULL OR e.id = $10)";
        // A filter on the deliveries walks their index newest first and stops
        // after a page, so a filter matching little or nothing is a probe,
        // not a walk over every event. Deliveries share their event's
        // created_at, so the cursor is the same.
        let by_delivery = "SELECT e.* FROM deliveries d JOIN events e \
                             ON e.account_id = d.account_id AND e.id = d.event_id \
                           WHERE d.account_id = $1 \
                             AND ($3 IS NULL OR d.created_at >= $3) \
                             AND ($4 IS NULL OR d.created_at < $4) \
                             AND ($5 IS NULL OR d.created_at < $5 \
                                  OR (d.created_at = $5 AND d.event_id < $6))";
        let sql = match (&filter.state, &filter.endpoint_id) {
            // An event shows once, for the first of its deliveries in the
            // state (the probe names every column of the index: a seek).
            (Some(_), _) => format!(
                "{by_delivery} AND d.state = $7 \
                   AND NOT EXISTS (SELECT 1 FROM deliveries f WHERE f.account_id = d.account_id \
                       AND f.state = d.state AND f.created_at = d.created_at \
                       AND f.event_id = d.event_id AND f.id < d.id) \
                   {endpoint_probe} {rest} \
                 ORDER BY d.created_at DESC, d.event_id DESC LIMIT $9"
            ),
            // One delivery per event and endpoint: no duplicates to drop.
            (None, Some(_)) => format!(
                "{by_delivery} AND d.endpoint_id = $8 AND ($7 IS NULL) {rest} \
                 ORDER BY d.created_at DESC, d.event_id DESC LIMIT $9"
            ),
            (None, None) => format!(
                "SELECT e.* FROM events e WHERE e.account_id = $1 \
                   AND ($3 IS NULL OR e.created_at >= $3) \
                   AND ($4 IS NULL OR e.created_at < $4) \
                   AND ($5 IS NULL OR e.created_at < $5 OR (e.created_at = $5 AND e.id < $6)) \
                   AND ($7 IS NULL) AND ($8 IS NULL) {rest} \
                 ORDER BY e.created_at DESC, e.id DESC LIMIT $9"
            ),
        };
        let (after_at, after_id) = match &filter.after {
            Some((at, id)) => (Some(*at), Some(id.clone())),
            None => (None, None),
        };
        let mut events = on_pool!(self, |p| sqlx::query_as::<_, Event>(&sql)
            .bind(account_id)
            .bind(&filter.event_type)
            .bind(filter.since.map(Timestamp::millis))
            .bind(filter.until.map(Timestamp::millis))
            .bind(after_at)
            .bind(&after_id)
            .bind(&filter.state)
            .bind(&filter.endpoint_id)
            .bind(limit + 1)
            .bind(&filter.id)
            .fetch_all(p)
            .await)?;
        let has_more = events.len() as i64 > limit;
        events.truncate(limit.max(0) as usize);
        let next = has_more
            .then(|| events.last().map(|e| (e.created_at, e.id.clone())))
            .flatten();
        let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        let mut by_event: HashMap<String, Vec<Delivery>> = HashMap::new();
        for d in self.deliveries_of_events(account_id, &ids).await? {
            by_event.entry(d.event_id.clone()).or_default().push(d);
        }
        let page = events
            .into_iter()
            .map(|e| {
                let deliveries = by_event.remove(&e.id).unwrap_or_default();
                (e, deliveries)
            })
            .collect();
        Ok(EventPage { events: page, next })
    }

    /// The deliveries of a page of events in one query, oldest first.
    async fn deliveries_of_events(
        &self,
        account_id: &str,
        event_ids: &[&str],
    ) -> Result<Vec<Delivery>> {
        if event_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT * FROM deliveries WHERE account_id = $1 AND event_id IN ({}) \
             ORDER BY created_at, id",
            placeholders(2, event_ids.len())
        );
        Ok(on_pool!(self, |p| {
            let mut q = sqlx::query_as::<_, Delivery>(&sql).bind(account_id);
            for id in event_ids {
                q = q.bind(*id);
            }
            q.fetch_all(p).await
        })?)
    }

    /// A delivery of this account; another account's id is not found.
    pub async fn account_delivery(&self, account_id: &str, id: &str) -> Result<Delivery> {
        let sql = "SELECT * FROM deliveries WHERE account_id = $1 AND id = $2";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Delivery>(sql)
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?)
    }

    /// Resend (SPEC §5): from delivered, failed or expired back to pending,
    /// due now, with a fresh deadline and backoff counter; history is kept.
    /// The audit row by `actor` is written in the same transaction.
    pub async fn resend_delivery(
        &self,
        account_id: &str,
        id: &str,
        actor: &str,
        give_up_at: Timestamp,
        now: Timestamp,
    ) -> Result<Delivery> {
        let sql = "UPDATE deliveries SET state = 'pending', attempts = 0, next_attempt_at = $1, \
                   give_up_at = $2, last_error = NULL, finished_at = NULL, updated_at = $1 \
                   WHERE account_id = $3 AND id = $4 \
                   AND state IN ('delivered', 'failed', 'expired') RETURNING *";
        let audit =
            "INSERT INTO replays (id, account_id, actor, kind, criteria, count, created_at) \
                     VALUES ($1, $2, $3, 'single', $4, 1, $5)";
        let criteria = serde_json::json!({ "delivery_id": id }).to_string();
        let updated = on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            let updated = sqlx::query_as::<_, Delivery>(sql)
                .bind(now.millis())
                .bind(give_up_at.millis())
                .bind(account_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
            if updated.is_some() {
                sqlx::query(audit)
                    .bind(ids::new_id(ids::REPLAY))
                    .bind(account_id)
                    .bind(actor)
                    .bind(&criteria)
                    .bind(now.millis())
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
            }
            Ok::<_, StoreError>(updated)
        })?;
        match updated {
            Some(d) => Ok(d),
            None => {
                // Tell "no such delivery" from "not in a state that can be resent".
                self.account_delivery(account_id, id).await?;
                Err(StoreError::Conflict(
                    "a pending or in-flight attempt for this delivery",
                ))
            }
        }
    }

    /// Ends a claimed delivery without an attempt (its deadline passed while
    /// it waited), recording why.
    pub async fn expire_claimed(
        &self,
        claimed: &Delivery,
        reason: &str,
        now: Timestamp,
    ) -> Result<()> {
        let sql =
            "UPDATE deliveries SET state = 'expired', claimed_at = NULL, lease_until = NULL, \
                   claim_token = NULL, last_error = $1, finished_at = $2, updated_at = $2 \
                   WHERE id = $3 AND state = 'in_flight' AND claim_token = $4";
        let n = on_writer!(self, |p| sqlx::query(sql)
            .bind(reason)
            .bind(now.millis())
            .bind(&claimed.id)
            .bind(&claimed.claim_token)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        claim_held(n, claimed)
    }

    /// Hands a claimed delivery back for later without counting an attempt
    /// (rate limit, half-open circuit busy).
    pub async fn postpone_claim(
        &self,
        claimed: &Delivery,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<()> {
        let sql =
            "UPDATE deliveries SET state = 'pending', claimed_at = NULL, lease_until = NULL, \
                   claim_token = NULL, next_attempt_at = $1, updated_at = $2 \
                   WHERE id = $3 AND state = 'in_flight' AND claim_token = $4";
        let n = on_writer!(self, |p| sqlx::query(sql)
            .bind(until.millis())
            .bind(now.millis())
            .bind(&claimed.id)
            .bind(&claimed.claim_token)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        claim_held(n, claimed)
    }

    pub async fn event_of(&self, delivery: &Delivery) -> Result<Event> {
        self.event(&delivery.account_id, &delivery.event_id).await
    }

    pub async fn add_notification(
        &self,
        account_id: &str,
        endpoint_id: Option<&str>,
        kind: &str,
        subject: &str,
        body: &str,
        now: Timestamp,
    ) -> Result<Notification> {
        let sql = "INSERT INTO notifications (id, account_id, endpoint_id, kind, subject, body, created_at) \
                   VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Notification>(sql)
            .bind(ids::new_id(ids::NOTIFICATION))
            .bind(account_id)
            .bind(endpoint_id)
            .bind(kind)
            .bind(subject)
            .bind(body)
            .bind(now.millis())
            .fetch_one(p)
            .await)?)
    }

    pub async fn notifications(&self, account_id: &str) -> Result<Vec<Notification>> {
        let sql = "SELECT * FROM notifications WHERE account_id = $1 ORDER BY created_at DESC, id";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Notification>(sql)
            .bind(account_id)
            .fetch_all(p)
            .await)?)
    }

    /// The audit log, newest first: one account's, or everyone's for admins.
    pub async fn replays(&self, account_id: Option<&str>, limit: i64) -> Result<Vec<Replay>> {
        let sql = "SELECT * FROM replays WHERE ($1 IS NULL OR account_id = $1) \
                   ORDER BY created_at DESC, id DESC LIMIT $2";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Replay>(sql)
            .bind(account_id)
            .bind(limit)
            .fetch_all(p)
            .await)?)
    }
}
