//! Events and their deliveries: storing an event with its fan-out in one
//! transaction, and reading them back for the API and the dashboard.

use std::collections::HashMap;

use super::{
    ingest::NewIngest, sql::placeholders, Attempt, Delivery, DeliveryState, Event, Pool, Result,
    Store, StoreError,
};
use crate::clock::Timestamp;

pub struct NewEvent {
    pub account_id: String,
    pub id: String,
    pub event_type: String,
    pub payload: Vec<u8>,
}

#[derive(Debug)]
pub struct InsertedEvent {
    pub event: Event,
    pub deliveries: Vec<Delivery>,
}

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
    /// `insert_events` for one event.
    pub async fn insert_event(
        &self,
        new: NewEvent,
        now: Timestamp,
        give_up_at: Timestamp,
    ) -> Result<InsertedEvent> {
        self.insert_event_for(new, None, now, give_up_at).await
    }

    /// Like `insert_event`; with `only` set, the event goes to that one
    /// endpoint whatever its filter (the dashboard's "send test event").
    pub async fn insert_event_for(
        &self,
        new: NewEvent,
        only: Option<&str>,
        now: Timestamp,
        give_up_at: Timestamp,
    ) -> Result<InsertedEvent> {
        let one = NewIngest {
            event: new,
            only: only.map(str::to_owned),
            now,
            give_up_at,
        };
        self.insert_events(std::slice::from_ref(&one))
            .await?
            .pop()
            .unwrap_or(Err(StoreError::Conflict("an event with this id")))
    }

    pub async fn event(&self, account_id: &str, id: &str) -> Result<Event> {
        let sql = "SELECT * FROM events WHERE account_id = $1 AND id = $2";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Event>(sql)
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?)
    }

    pub async fn deliveries_of_event(
        &self,
        account_id: &str,
        event_id: &str,
    ) -> Result<Vec<Delivery>> {
        let sql = "SELECT * FROM deliveries WHERE account_id = $1 AND event_id = $2 \
                   ORDER BY created_at, id";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Delivery>(sql)
            .bind(account_id)
            .bind(event_id)
            .fetch_all(p)
            .await)?)
    }

    pub async fn delivery(&self, id: &str) -> Result<Delivery> {
        let sql = "SELECT * FROM deliveries WHERE id = $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Delivery>(sql)
            .bind(id)
            .fetch_one(p)
            .await)?)
    }

    pub async fn attempts_of_delivery(&self, delivery_id: &str) -> Result<Vec<Attempt>> {
        let sql = "SELECT * FROM attempts WHERE delivery_id = $1 ORDER BY attempt";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Attempt>(sql)
            .bind(delivery_id)
            .fetch_all(p)
            .await)?)
    }

    pub async fn count_deliveries(&self, state: DeliveryState) -> Result<i64> {
        let sql = "SELECT COUNT(*) FROM deliveries WHERE state = $1";
        Ok(on_pool!(self, |p| sqlx::query_scalar::<_, i64>(sql)
            .bind(state.as_str())
            .fetch_one(p)
            .await)?)
    }

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

    pub async fn event_of(&self, delivery: &Delivery) -> Result<Event> {
        self.event(&delivery.account_id, &delivery.event_id).await
    }
}
