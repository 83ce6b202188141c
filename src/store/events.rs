//! Events and their deliveries: storing an event with its fan-out in one
//! transaction, and reading them back for the API and the dashboard.

use std::collections::HashMap;

use super::{
    ingest::NewIngest, sql::placeholders, Attempt, Backend, Delivery, DeliveryState, Event, Pool,
    Result, Store, StoreError,
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
    /// Its group's lease (SQLite, `Workers`) left nothing due that a
    /// claim could start now: no claim loop need be woken for it.
    pub nothing_left_due: bool,
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
    /// The page just newer than this (created_at, id): paging back.
    pub before: Option<(i64, String)>,
    /// Exactly this event id.
    pub id: Option<String>,
    /// Events with a delivery whose last answer was this.
    pub answer: Option<AnswerFilter>,
}

/// A delivery's last answer, as a debugger asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerFilter {
    /// Exactly this HTTP status.
    Status(u16),
    /// Any status of a class: 4 for 4xx, 5 for 5xx.
    Class(u8),
    /// No HTTP answer in time.
    Timeout,
}

/// The rows whose last answer was no success: what the answer indexes
/// hold (migration 0018). Queries repeat it word for word so that SQLite
/// sees the partial indexes apply.
const NOT_A_SUCCESS: &str = "(d.last_status < 200 OR d.last_status > 299 \
     OR (d.last_status IS NULL AND d.last_error IS NOT NULL))";

/// The class of a last answer, as indexed: the status's hundreds, -1 for a
/// timeout, 0 for any other missing answer.
const ANSWER_CLASS: &str = "(CASE WHEN d.last_status IS NOT NULL THEN d.last_status / 100 \
     WHEN d.last_error LIKE 'timed out%' THEN -1 ELSE 0 END)";

enum Bind {
    Text(String),
    Int(i64),
}

/// Binds `list_sql`'s parameters, in order, to a query of either backend.
macro_rules! bind_all {
    ($query:expr, $binds:expr) => {{
        let mut q = $query;
        for b in $binds {
            q = match b {
                Bind::Text(t) => q.bind(t.as_str()),
                Bind::Int(i) => q.bind(*i),
            };
        }
        q
    }};
}

/// How many of the newest events of a type the list probes one by one for
/// a delivery filter before it walks the filter's deliveries instead.
/// Probing pays for every event it passes, so a filter that matches few
/// of a common type's events walked them all: p95 81 ms on SQLite for "a
/// type and an answer nothing got" at 1 M deliveries in `make bench`.
/// Postgres misjudged how many deliveries an answer matches (partial
/// indexes carry no statistics, and the no-success predicate is
/// correlated with every answer) and chose to hash them all instead: p95
/// 235 ms for "a type and last answer 5xx". A thousand probes take a few
/// milliseconds; when they find less than a page, the filter is rare
/// among the type's events and its deliveries are the short walk.
const PROBED_EVENTS: i64 = 1_000;

/// The forms of `list_sql`'s query.
#[derive(Clone, PartialEq, Eq)]
enum Walk {
    /// Each filter as it fits best; with a type and a delivery filter,
    /// the type's events newest first, each probed, down to this one.
    Events(Option<(i64, String)>),
    /// With a type and a delivery filter: the filter's deliveries newest
    /// first, each event checked for the type.
    Deliveries,
    /// The created_at and id of the `PROBED_EVENTS`th event the filters
    /// on events (type, window, cursor) match: where a probing walk
    /// stops. For a filter without delivery filters only: their
    /// parameters would go unused, which Postgres refuses.
    LastProbed,
}

/// A type with a delivery filter. Not with an id (one event, one probe),
/// nor with a success, which most deliveries are, so a walk of the type's
/// events finds a page at once.
fn typed(filter: &EventFilter) -> bool {
    filter.event_type.is_some()
        && filter.id.is_none()
        && !a_success(filter.answer)
        && (filter.state.is_some() || filter.endpoint_id.is_some() || filter.answer.is_some())
}

/// An answer filter for one success status: not in the answer indexes.
fn a_success(answer: Option<AnswerFilter>) -> bool {
    matches!(answer, Some(AnswerFilter::Status(c)) if (200..300).contains(&c))
}

/// The list's query for these filters ($1 is the account) and its other
/// parameters. Only the filters given appear in the text, so each form
/// gets a plan of its own and walks the index that fits it:
/// an exact id is a key lookup; a type alone walks the type index; a
/// delivery filter walks the deliveries' index for it newest first and
/// stops after a page, so a filter matching little or nothing is a probe;
/// a type with a delivery filter probes the type's newest events one by
/// one, or walks the filter's deliveries (`Walk`, `list_events`).
fn list_sql(
    filter: &EventFilter,
    limit: i64,
    backend: Backend,
    walk: &Walk,
) -> (String, Vec<Bind>) {
    let mut binds = Vec::new();
    let mut arg = |b: Bind| {
        binds.push(b);
        format!("${}", binds.len() + 1)
    };
    // Conditions on one delivery, written for an alias.
    let mut on_delivery: Vec<String> = Vec::new();
    // Successes are not in the answer indexes; they are most of the rows,
    // so walking the events and probing each finds a page quickly.
    let dense = a_success(filter.answer);
    if let Some(state) = &filter.state {
        on_delivery.push(format!("d.state = {}", arg(Bind::Text(state.clone()))));
    }
    if let Some(endpoint) = &filter.endpoint_id {
        on_delivery.push(format!(
            "d.endpoint_id = {}",
            arg(Bind::Text(endpoint.clone()))
        ));
    }
    match filter.answer {
        None => {}
        Some(AnswerFilter::Status(code)) if dense => {
            on_delivery.push(format!("d.last_status = {}", arg(Bind::Int(code.into()))));
        }
        Some(AnswerFilter::Status(code)) => on_delivery.push(format!(
            "d.last_status = {} AND {NOT_A_SUCCESS}",
            arg(Bind::Int(code.into()))
        )),
        Some(AnswerFilter::Class(class)) => on_delivery.push(format!(
            "{ANSWER_CLASS} = {} AND {NOT_A_SUCCESS}",
            arg(Bind::Int(class.into()))
        )),
        Some(AnswerFilter::Timeout) => {
            on_delivery.push(format!("{ANSWER_CLASS} = -1 AND {NOT_A_SUCCESS}"))
        }
    }
    let on_event = |alias: &str, arg: &mut dyn FnMut(Bind) -> String| {
        let mut c = Vec::new();
        if let Some(t) = &filter.event_type {
            c.push(format!(
                "{alias}.event_type = {}",
                arg(Bind::Text(t.clone()))
            ));
        }
        if let Some(id) = &filter.id {
            c.push(format!("{alias}.id = {}", arg(Bind::Text(id.clone()))));
        }
        c
    };
    // The time range and the cursor, on a row with created_at and an event id.
    let window = |at: &str, id: &str, arg: &mut dyn FnMut(Bind) -> String| {
        let mut c = Vec::new();
        if let Some(since) = filter.since {
            c.push(format!("{at} >= {}", arg(Bind::Int(since.millis()))));
        }
        if let Some(until) = filter.until {
            c.push(format!("{at} < {}", arg(Bind::Int(until.millis()))));
        }
        if let Some((after_at, after_id)) = &filter.after {
            let a = arg(Bind::Int(*after_at));
            let i = arg(Bind::Text(after_id.clone()));
            c.push(format!("({at} < {a} OR ({at} = {a} AND {id} < {i}))"));
        }
        if let Some((before_at, before_id)) = &filter.before {
            let a = arg(Bind::Int(*before_at));
            let i = arg(Bind::Text(before_id.clone()));
            c.push(format!("({at} > {a} OR ({at} = {a} AND {id} > {i}))"));
        }
        c
    };
    // Paging back walks the same index the other way; the caller turns
    // the page round.
    let dir = if filter.before.is_some() {
        "ASC"
    } else {
        "DESC"
    };
    let and = |c: Vec<String>| c.iter().map(|c| format!(" AND {c}")).collect::<String>();
    let typed = typed(filter);
    let walk_events = !(typed && *walk == Walk::Deliveries)
        && (dense || filter.id.is_some() || filter.event_type.is_some() || on_delivery.is_empty());
    let sql = if *walk == Walk::LastProbed {
        let mut c = on_event("e", &mut arg);
        c.extend(window("e.created_at", "e.id", &mut arg));
        format!(
            "SELECT e.created_at, e.id FROM events e WHERE e.account_id = $1{} \
             ORDER BY e.created_at {dir}, e.id {dir} LIMIT 1 OFFSET {}",
            and(c),
            PROBED_EVENTS - 1
        )
    } else if walk_events {
        // A delivery filter becomes one probe per event: an event has a
        // delivery per endpoint, few.
        let mut c = on_event("e", &mut arg);
        c.extend(window("e.created_at", "e.id", &mut arg));
        if let Walk::Events(Some((at, id))) = walk {
            let (a, i) = (arg(Bind::Int(*at)), arg(Bind::Text(id.clone())));
            // A row value, not an OR: Postgres then walks the type's index
            // in order and stops at a page (with the OR it read the
            // thousand and sorted them, 6 ms against 1 in psql).
            let up_to = if dir == "DESC" { ">=" } else { "<=" };
            c.push(format!("(e.created_at, e.id) {up_to} ({a}, {i})"));
        }
        if !on_delivery.is_empty() {
            // A delivery is made with its event and shares its created_at.
            // Said in the probe, it makes it a seek on the delivery
            // indexes that end (created_at, event_id); without it SQLite,
            // having no statistics, walked all of the account's deliveries
            // in the state for each event (0.9 s for a page of a type
            // among 100 k delivered events). Postgres, free to turn the
            // probe into a join, would take the term for a second filter,
            // expect next to nothing to match, and hash every event of the
            // type instead of probing a page; for a type OFFSET 0 keeps the
            // probe a subplan run for each walked event, with the term.
            let (same_time, fence) = match (backend, typed) {
                (Backend::Sqlite, _) => (" AND d.created_at = e.created_at", ""),
                (Backend::Postgres, true) => (" AND d.created_at = e.created_at", " OFFSET 0"),
                (Backend::Postgres, false) => ("", ""),
            };
            c.push(format!(
                "EXISTS (SELECT 1 FROM deliveries d WHERE d.account_id = e.account_id \
                   AND d.event_id = e.id{same_time}{}{fence})",
                and(on_delivery)
            ));
        }
        format!(
            "SELECT e.* FROM events e WHERE e.account_id = $1{} \
             ORDER BY e.created_at {dir}, e.id {dir} LIMIT {}",
            and(c),
            arg(Bind::Int(limit))
        )
    } else {
        // An event shows once, for the first of its deliveries that match.
        // With an endpoint there is only one (one delivery per event and
        // endpoint), so nothing to drop.
        let once = if filter.endpoint_id.is_some() {
            String::new()
        } else {
            let same = and(on_delivery.iter().map(|c| c.replace("d.", "f.")).collect());
            format!(
                " AND NOT EXISTS (SELECT 1 FROM deliveries f WHERE f.account_id = d.account_id \
                   AND f.event_id = d.event_id AND f.created_at = d.created_at \
                   AND f.id < d.id{same})"
            )
        };
        let mut c = on_delivery;
        c.extend(on_event("e", &mut arg));
        c.extend(window("d.created_at", "d.event_id", &mut arg));
        format!(
            "SELECT e.* FROM deliveries d JOIN events e \
               ON e.account_id = d.account_id AND e.id = d.event_id \
             WHERE d.account_id = $1{}{once} \
             ORDER BY d.created_at {dir}, d.event_id {dir} LIMIT {}",
            and(c),
            arg(Bind::Int(limit))
        )
    };
    (sql, binds)
}

#[derive(Debug)]
pub struct EventPage {
    pub events: Vec<(Event, Vec<Delivery>)>,
    /// Pass back as `after` for the next page; `None` on the last page.
    pub next: Option<(i64, String)>,
    /// Pass back as `before` for the newer page; `None` on the newest.
    pub prev: Option<(i64, String)>,
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
            traceparent: None,
            key_id: None,
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
    ///
    /// The filters on deliveries (state, endpoint, last answer) hold for
    /// one and the same delivery: "failed to this endpoint" is a delivery
    /// to it that failed, not an event that failed somewhere else.
    pub async fn list_events(
        &self,
        account_id: &str,
        filter: &EventFilter,
        limit: i64,
    ) -> Result<EventPage> {
        let backend = self.backend();
        let query = |walk| list_sql(filter, limit + 1, backend, &walk);
        let mut events;
        if typed(filter) {
            let of_type = EventFilter {
                state: None,
                endpoint_id: None,
                answer: None,
                ..filter.clone()
            };
            let (sql, binds) = list_sql(&of_type, 1, backend, &Walk::LastProbed);
            let last = self.list_last_probed(account_id, &sql, &binds).await?;
            let probed_all = last.is_none();
            let (sql, binds) = query(Walk::Events(last));
            events = self.list_query(account_id, &sql, &binds).await?;
            // Less than a page among a thousand events of the type: the
            // filter is rare among them, and its own index, walked again
            // from the cursor, reaches a page sooner than the events do.
            // (With exactly a thousand the probe saw them all; the walk
            // is then only redundant.)
            if !probed_all && events.len() as i64 <= limit {
                let (sql, binds) = query(Walk::Deliveries);
                events = self.list_query(account_id, &sql, &binds).await?;
            }
        } else {
            let (sql, binds) = query(Walk::Events(None));
            events = self.list_query(account_id, &sql, &binds).await?;
        }
        let has_more = events.len() as i64 > limit;
        events.truncate(limit.max(0) as usize);
        let key = |e: Option<&Event>| e.map(|e| (e.created_at, e.id.clone()));
        let backwards = filter.before.is_some();
        if backwards {
            events.reverse();
        }
        // Paging back, the cursor's own row proves an older page; paging
        // on, the cursor proves a newer one.
        let (next, prev) = if backwards {
            (
                key(events.last()),
                has_more.then(|| key(events.first())).flatten(),
            )
        } else {
            (
                has_more.then(|| key(events.last())).flatten(),
                filter
                    .after
                    .is_some()
                    .then(|| key(events.first()))
                    .flatten(),
            )
        };
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
        Ok(EventPage {
            events: page,
            next,
            prev,
        })
    }

    async fn list_query(&self, account_id: &str, sql: &str, binds: &[Bind]) -> Result<Vec<Event>> {
        Ok(on_pool!(self, |p| bind_all!(
            sqlx::query_as::<_, Event>(sql).bind(account_id),
            binds
        )
        .fetch_all(p)
        .await)?)
    }

    async fn list_last_probed(
        &self,
        account_id: &str,
        sql: &str,
        binds: &[Bind],
    ) -> Result<Option<(i64, String)>> {
        Ok(on_pool!(self, |p| bind_all!(
            sqlx::query_as::<_, (i64, String)>(sql).bind(account_id),
            binds
        )
        .fetch_optional(p)
        .await)?)
    }

    /// The event types the account has sent, in order, at most `limit`:
    /// one probe of the type index per type, however many events.
    pub async fn event_types(&self, account_id: &str, limit: i64) -> Result<Vec<String>> {
        let sql = "WITH RECURSIVE t(ty) AS ( \
                     SELECT min(event_type) FROM events WHERE account_id = $1 \
                     UNION ALL \
                     SELECT (SELECT min(event_type) FROM events \
                             WHERE account_id = $1 AND event_type > t.ty) \
                     FROM t WHERE t.ty IS NOT NULL) \
                   SELECT ty FROM t WHERE ty IS NOT NULL LIMIT $2";
        Ok(on_pool!(self, |p| sqlx::query_scalar::<_, String>(sql)
            .bind(account_id)
            .bind(limit)
            .fetch_all(p)
            .await)?)
    }

    /// The deliveries of a page of events in one query, oldest first.
    pub async fn deliveries_of_events(
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

    /// The account's events created in [since, until), oldest first, after
    /// the (created_at, id) `after`, at most `limit`: an export's pages.
    pub async fn events_between(
        &self,
        account_id: &str,
        since: Option<Timestamp>,
        until: Option<Timestamp>,
        after: Option<&(i64, String)>,
        limit: i64,
    ) -> Result<Vec<Event>> {
        let sql = "SELECT * FROM events WHERE account_id = $1 \
                     AND ($2 IS NULL OR created_at >= $2) AND ($3 IS NULL OR created_at < $3) \
                     AND ($4 IS NULL OR created_at > $4 OR (created_at = $4 AND id > $5)) \
                   ORDER BY created_at, id LIMIT $6";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Event>(sql)
            .bind(account_id)
            .bind(since.map(Timestamp::millis))
            .bind(until.map(Timestamp::millis))
            .bind(after.map(|a| a.0))
            .bind(after.map(|a| a.1.clone()))
            .bind(limit)
            .fetch_all(p)
            .await)?)
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
