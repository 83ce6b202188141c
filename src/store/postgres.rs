//! The scale-out backend: many nodes share one Postgres and one queue.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    Connection, FromRow, PgConnection, PgPool, Row,
};

use super::{
    claim_rules::ClaimRules,
    completion::{answered, distinct_runs, Completion, Outcome},
    fan_outs::{FanOut, FanOuts},
    ingest::{self, LeaseTerms, NewIngest, Target},
    parse_options, redact_url,
    sql::HAND_BACK_CLAIM,
    Claim, Delivery, Endpoint, Event, InsertedEvent, Pool, Result, Store, StoreError,
};
use crate::clock::Timestamp;

pub mod warm;

pub use warm::{Warm, WarmConnection};

/// Connects, optionally inside `schema` (created if missing): tests get a
/// fresh schema each, so they need no CREATE DATABASE privilege.
pub async fn connect(url: &str, schema: Option<&str>) -> Result<Store> {
    connect_pooled(url, schema, super::DEFAULT_POOL).await
}

/// A pooled connection idle this long is pinged before it is handed out;
/// one used more recently is not. The ping was a round trip before every
/// statement, and the hot path (ingest, claim, the batch's reads, its
/// results) is a few statements each: at light load it added as many
/// waits for the server to the first attempt. A connection that died
/// while idle (the server restarted, a proxy cut it) is still found out
/// and replaced before anyone uses it.
pub const PING_IF_IDLE_FOR: Duration = Duration::from_secs(1);

pub async fn connect_pooled(
    url: &str,
    schema: Option<&str>,
    max_connections: u32,
) -> Result<Store> {
    let mut options: PgConnectOptions = parse_options(url)?;
    if let Some(schema) = schema {
        if !schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(StoreError::Config(format!(
                "invalid schema name {schema:?}"
            )));
        }
        options = options.options([("search_path", schema)]);
    }
    let connect_error = |e: sqlx::Error| StoreError::Connect {
        url: redact_url(url),
        cause: e.to_string(),
    };
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        // With the database down, a producer hears 503 within 5 s.
        .acquire_timeout(Duration::from_secs(5))
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_IF_IDLE_FOR {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
        .connect_with(options)
        .await
        .map_err(connect_error)?;
    if let Some(schema) = schema {
        sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .execute(&pool)
            .await
            .map_err(connect_error)?;
    }
    // Fewer than half the pool, none of a pool of two or three: the rest
    // (the API's reads, the dashboard, maintenance) keeps the other half.
    let keep = max_connections.saturating_sub(2) as usize / 2;
    let warm = Warm::start(pool.clone(), keep, PING_IF_IDLE_FOR);
    Ok(Store {
        pool: Pool::Postgres(pool),
        writer: None,
        pg_warm: Some(warm),
        pg_schema: schema.map(str::to_owned),
        secrets: None,
        node: None,
        fan_outs: super::fan_outs::empty(),
    })
}

/// Claims in one statement, `dakghar_claim_with_inputs` (migration 0033,
/// 0031's claim whose leasing statement also joins the inputs; the rules
/// are explained in 0012, 0014, 0015 and 0027): each endpoint is locked, without
/// waiting, only while its free slots are counted and its rows leased, so
/// claims on every node run side by side and `max_in_flight` still holds
/// across them. One round trip: the claim is on the path of every first
/// attempt, so it answers with each delivery's event and endpoint too.
/// Every row carries the claim's `held_back`; a claim that took nothing
/// but held work back answers one row without a delivery.
pub(super) async fn claim_due(
    warm: &Warm,
    now: Timestamp,
    lease_until: Timestamp,
    limit: i64,
    rules: ClaimRules,
    token: &str,
) -> Result<Claim> {
    let mut conn = warm.acquire().await?;
    let rows = sqlx::query(
        "SELECT c.held_back, (c.claimed).*, (c.event).id IS NOT NULL AS has_event, \
           (c.event).event_type AS event_type, (c.event).payload AS event_payload, \
           (c.event).created_at AS event_created_at, (c.event).traceparent AS event_traceparent, \
           c.endpoint AS endpoint_json \
         FROM dakghar_claim_with_inputs($1, $2, $3, $4, $5, $6) c",
    )
    .bind(now.millis())
    .bind(lease_until.millis())
    .bind(limit)
    .bind(token)
    .bind(rules.default_rate)
    .bind(rules.host_cap)
    .fetch_all(&mut *conn)
    .await?;
    conn.answered();
    let mut claim = Claim {
        deliveries: Vec::with_capacity(rows.len()),
        ..Claim::default()
    };
    for row in &rows {
        claim.held_back |= row.try_get::<bool, _>("held_back")?;
        if row.try_get::<Option<String>, _>("id")?.is_none() {
            continue;
        }
        let delivery = Delivery::from_row(row)?;
        if let Some(json) = row.try_get::<Option<String>, _>("endpoint_json")? {
            if let Some(endpoint) = endpoint_along(&json, "claim", Some(&delivery.endpoint_id)) {
                claim
                    .read_along
                    .endpoints
                    .insert(delivery.endpoint_id.clone(), endpoint);
            }
        }
        if let Some(event) = event_along(row, &delivery) {
            claim.read_along.events.insert(delivery.id.clone(), event);
        }
        claim.deliveries.push(delivery);
    }
    Ok(claim)
}

/// An endpoint as a claim or an ingest lease read it along (its row as
/// JSON); `None` if it will not decode: the round reads it again as a
/// row, which says whether the row is broken or this decoding is. `id`
/// names it in the warning where the reader knows it.
fn endpoint_along(json: &str, reader: &str, id: Option<&str>) -> Option<Endpoint> {
    match serde_json::from_str::<Endpoint>(json) {
        Ok(endpoint) => Some(endpoint),
        Err(e) => {
            let endpoint = id.unwrap_or("unknown");
            tracing::warn!(%endpoint, error = %e, "the {reader}'s copy of an endpoint did not decode; reading it again");
            None
        }
    }
}

/// A claimed delivery's event as its claim read it along; `None` if it
/// was not found or will not decode: the round reads it again, and a row
/// that still will not decode holds back only its own delivery.
fn event_along(row: &sqlx::postgres::PgRow, delivery: &Delivery) -> Option<Event> {
    if !row.try_get::<Option<bool>, _>("has_event").ok()?? {
        return None;
    }
    Some(Event {
        account_id: delivery.account_id.clone(),
        id: delivery.event_id.clone(),
        event_type: row.try_get("event_type").ok()?,
        payload: row.try_get("event_payload").ok()?,
        created_at: row.try_get("event_created_at").ok()?,
        traceparent: row.try_get("event_traceparent").ok()?,
    })
}

/// The channel that tells every node's workers new work is due. Named per
/// schema so separate installations (and tests) on one server stay apart.
pub(super) fn work_channel(schema: Option<&str>) -> String {
    format!("dakghar_work_{}", schema.unwrap_or("public"))
}

/// `origin` (a node's id, or empty) lets that node ignore its own news.
pub(super) async fn announce_work(warm: &Warm, schema: Option<&str>, origin: &str) -> Result<()> {
    // A wake-up, not data, so its commit need not wait for the WAL flush.
    // Notifying takes the cluster's one notify lock until the commit ends:
    // durable, every announcement (one per ingest group on every node)
    // queued behind a disk flush of its own, and ingest's own commits
    // waited behind those flushes.
    let mut conn = warm.acquire().await?;
    sqlx::query("SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)")
        .bind(work_channel(schema))
        .bind(origin)
        .execute(&mut *conn)
        .await?;
    conn.answered();
    Ok(())
}

/// `Store::complete_attempts` in one statement whatever the batch size:
/// the rows travel as arrays to `dakghar_record_attempts` (migration
/// 0038; 0028 and 0026 before it), which moves the deliveries still
/// claimed under their tokens, writes their attempts and the endpoints'
/// successes (one UPDATE for them all), and answers with the ids it
/// moved. A transaction of a statement each held
/// its row locks while it waited for us between them; before that, a
/// statement per row paid a round trip each. A batch that names a
/// delivery twice is written in parts that each name it once
/// (`distinct_runs`; rare, so a call each costs nothing); should a later
/// part fail after the first committed, its results alone are unwritten.
pub(super) async fn complete_attempts(
    warm: &Warm,
    batch: &[Completion],
) -> Result<Vec<Result<Delivery>>> {
    let mut answers = Vec::with_capacity(batch.len());
    for (n, run) in distinct_runs(batch).into_iter().enumerate() {
        match record_run(warm, run).await {
            Ok(run_answers) => answers.extend(run_answers),
            Err(e) if n == 0 => return Err(e),
            Err(e) => answers.extend(run.iter().map(|_| {
                Err(StoreError::Unwritten(format!(
                    "the attempt's result was not recorded (its batch's write stopped \
                     part-way: {e})"
                )))
            })),
        }
    }
    Ok(answers)
}

/// One call of `dakghar_record_attempts` for results that name each
/// delivery once.
async fn record_run(warm: &Warm, batch: &[Completion]) -> Result<Vec<Result<Delivery>>> {
    let call = "SELECT * FROM dakghar_record_attempts($1::text[], $2::text[], $3::text[], \
                  $4::int8[], $5::int8[], $6::int8[], $7::int8[], $8::bytea[], $9::text[], \
                  $10::int8[], $11::int8[], $12::int8[], $13::int8[], $14::text[], $15::text[], \
                  $16::text[], $17::text[])";
    let rows: Vec<(&Completion, Outcome)> = batch.iter().map(|c| (c, c.outcome())).collect();
    let mut conn = warm.acquire().await?;
    let written: Vec<String> = sqlx::query_scalar(call)
        .bind(column(&rows, |(c, _)| c.claimed.id.clone()))
        .bind(column(&rows, |(c, _)| c.claimed.claim_token.clone()))
        .bind(column(&rows, |(_, o)| o.state.as_str()))
        .bind(column(&rows, |(_, o)| o.counted))
        .bind(column(&rows, |(c, _)| c.record.attempt))
        .bind(column(&rows, |(_, o)| o.next_at))
        .bind(column(&rows, |(c, _)| c.record.response_status))
        .bind(column(&rows, |(c, _)| c.record.response_body.clone()))
        .bind(column(&rows, |(c, _)| c.record.error.clone()))
        .bind(column(&rows, |(_, o)| o.finished_at))
        .bind(column(&rows, |(c, _)| c.now.millis()))
        .bind(column(&rows, |(c, _)| c.record.started_at))
        .bind(column(&rows, |(c, _)| c.record.duration_ms))
        .bind(column(&rows, |(c, _)| c.record.request_headers.clone()))
        .bind(column(&rows, |(c, _)| c.record.response_headers.clone()))
        .bind(column(&rows, |(c, _)| c.record.classification.clone()))
        .bind(column(&rows, |(c, _)| c.claimed.endpoint_id.clone()))
        .fetch_all(&mut *conn)
        .await?;
    conn.answered();
    Ok(answered(batch, &written.into_iter().collect()))
}

/// `Store::insert_events` in one statement on one connection whatever the
/// batch size, planned from the accounts' fan-outs this node keeps
/// (`FanOuts`, migration 0034): an account's events are written only if
/// its `endpoints_version` is still the one its fan-out was read at, so
/// the plan is as fresh as a read just before the write. A stale account
/// is read again and its events written in another pass; the last pass
/// reads just before it writes and checks no version, as every write did
/// before 0034. Each pass commits by itself: when a later one fails, the
/// group is answered item by item and only its events are `Unwritten`.
/// Two round trips with the pool's check at most, where a read and a
/// write took three: under load each waited for our side to be scheduled
/// again (sampled in `pg_stat_activity`, ingest transactions were mostly
/// idle in transaction).
///
/// The write key-share locks the planned endpoints still there, and
/// creates deliveries only for them and only for events it inserted. So
/// deleting an endpoint waits for the write to commit and then finds its
/// deliveries (they have no foreign keys, migration 0022; the deletion's
/// last pass takes them), and an endpoint deleted in between gets none.
/// One created or refiltered as the write runs is a race either way: the
/// event came first. Likewise an event that names its key is written
/// only if the key is active in the write's snapshot.
pub(super) async fn insert_events(
    warm: &Warm,
    fan_outs: &FanOuts,
    batch: &[NewIngest],
    lease: Option<(LeaseTerms, &str)>,
) -> Result<(Vec<Result<InsertedEvent>>, Claim)> {
    const PASSES: usize = 3;
    let mut conn = warm.acquire().await?;
    let mut answers: Vec<Result<InsertedEvent>> = Vec::with_capacity(batch.len());
    let mut pending: Vec<usize> = (0..batch.len()).collect();
    // What every pass leased; drained only if each pass was.
    let mut claim = Claim {
        drained: lease.is_some(),
        ..Claim::default()
    };
    for pass in 0..PASSES {
        let items: Vec<&NewIngest> = pending.iter().map(|&i| &batch[i]).collect();
        let checked = pass + 1 < PASSES;
        // A later pass leases within what the earlier ones left.
        let lease = lease.map(|(terms, token)| {
            let limit = terms.limit - claim.deliveries.len() as i64;
            (LeaseTerms { limit, ..terms }, token)
        });
        let written = write_pass(&mut conn, fan_outs, &items, checked, lease).await;
        let (written, stale) = match written {
            Ok((written, stale, leased)) => {
                claim.deliveries.extend(leased.deliveries);
                claim.held_back |= leased.held_back;
                claim.drained &= leased.drained;
                claim
                    .read_along
                    .endpoints
                    .extend(leased.read_along.endpoints);
                (written, stale)
            }
            Err(e) if pass == 0 => return Err(e),
            // Earlier passes committed their events: the group is answered
            // item by item, and only the rest failed.
            Err(e) => {
                for &i in &pending {
                    answers[i] = Err(StoreError::Unwritten(format!(
                        "the event was not stored (its group's write stopped part-way: {e}); \
                         send it again"
                    )));
                }
                claim.drained = false;
                return Ok((answers, claim));
            }
        };
        let mut next = Vec::new();
        for (&i, answer) in pending.iter().zip(written) {
            if stale.contains(&batch[i].event.account_id) {
                next.push(i);
            }
            match pass {
                // Stale ones are answered again by a later pass.
                0 => answers.push(answer),
                _ => answers[i] = answer,
            }
        }
        for account in &stale {
            fan_outs.forget(account);
        }
        if next.is_empty() {
            break;
        }
        pending = next;
    }
    conn.answered();
    Ok((answers, claim))
}

/// One pass of `insert_events` over `items`: planned from the kept
/// fan-outs where `checked`, else from a read just before the write.
async fn write_pass(
    conn: &mut WarmConnection<'_>,
    fan_outs: &FanOuts,
    items: &[&NewIngest],
    checked: bool,
    lease: Option<(LeaseTerms, &str)>,
) -> Result<(Vec<Result<InsertedEvent>>, HashSet<String>, Claim)> {
    let accounts = ingest::accounts(items);
    let mut known = match checked {
        true => fan_outs.get_many(&accounts),
        false => HashMap::new(),
    };
    let missing: Vec<String> = accounts
        .into_iter()
        .filter(|a| !known.contains_key(a))
        .collect();
    if !missing.is_empty() {
        for (account, fan_out) in read_fan_outs(conn, &missing).await? {
            fan_outs.keep(account.clone(), Arc::clone(&fan_out));
            known.insert(account, fan_out);
        }
    }
    write_events(conn, items, &known, checked, lease).await
}

/// The accounts' fan-outs in one snapshot; an account that does not exist
/// has none.
async fn read_fan_outs(
    conn: &mut PgConnection,
    accounts: &[String],
) -> Result<HashMap<String, Arc<FanOut>>> {
    // Planned once per connection (migration 0034).
    let rows: Vec<(String, i64, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT account_id, version, endpoint_id, event_types FROM dakghar_ingest_fan_out($1)",
    )
    .bind(accounts)
    .fetch_all(&mut *conn)
    .await?;
    let mut read: HashMap<String, (i64, Vec<Target>)> = HashMap::new();
    for (account, version, endpoint, event_types) in rows {
        let entry = read
            .entry(account.clone())
            .or_insert_with(|| (version, Vec::new()));
        if let (Some(id), Some(types)) = (endpoint, event_types) {
            entry.1.push(Target::new(id, account, &types));
        }
    }
    Ok(read
        .into_iter()
        .map(|(account, (version, targets))| (account, Arc::new(FanOut { version, targets })))
        .collect())
}

/// One write of `items`, planned from `known`; with `checked`, only for
/// accounts whose version is still the one in `known`. Answers for each
/// item and names the accounts found stale (their items' answers are
/// not final: nothing of theirs was written). With `lease`, the same
/// statement leases what it made due (`dakghar_ingest_lease`, migration
/// 0037): each endpoint's first new rows it may start are written in
/// flight, and older due rows of the same endpoints are leased first.
async fn write_events(
    conn: &mut WarmConnection<'_>,
    items: &[&NewIngest],
    known: &HashMap<String, Arc<FanOut>>,
    checked: bool,
    lease: Option<(LeaseTerms, &str)>,
) -> Result<(Vec<Result<InsertedEvent>>, HashSet<String>, Claim)> {
    let write = "WITH active AS ( \
                   SELECT id FROM api_keys WHERE id = ANY($14::text[]) AND revoked_at IS NULL \
                   UNION ALL \
                   SELECT id FROM platform_keys WHERE id = ANY($14::text[]) \
                     AND revoked_at IS NULL), \
                 fresh AS ( \
                   SELECT a.id FROM accounts a \
                   JOIN unnest($16::text[], $17::int8[]) AS v(id, version) \
                     ON a.id = v.id AND a.endpoints_version = v.version), \
                 kept AS ( \
                   INSERT INTO events (account_id, id, event_type, payload, created_at, \
                     traceparent) \
                   SELECT n.account_id, n.id, n.event_type, n.payload, n.created_at, \
                     n.traceparent \
                   FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::int8[], \
                     $6::text[], $15::text[]) \
                     AS n(account_id, id, event_type, payload, created_at, traceparent, key_id) \
                   WHERE (n.key_id IS NULL OR n.key_id IN (SELECT id FROM active)) \
                     AND (n.account_id IN (SELECT id FROM fresh) \
                       OR NOT n.account_id = ANY($16::text[])) \
                   ON CONFLICT DO NOTHING RETURNING account_id, id), \
                 live AS ( \
                   SELECT id FROM endpoints WHERE id = ANY($7::text[]) AND state <> 'disabled' \
                   FOR KEY SHARE), \
                 new AS MATERIALIZED ( \
                   SELECT i.*, row_number() OVER ( \
                     PARTITION BY i.endpoint_id ORDER BY i.at, i.id) AS nth \
                   FROM unnest($8::text[], $9::text[], $10::text[], $11::text[], $12::int8[], \
                     $13::int8[]) AS i(id, account_id, event_id, endpoint_id, at, give_up_at) \
                   WHERE (i.account_id, i.event_id) IN (SELECT account_id, id FROM kept) \
                     AND i.endpoint_id IN (SELECT id FROM live)), \
                 lease AS MATERIALIZED ( \
                   SELECT l.* FROM ( \
                     SELECT array_agg(endpoint_id) AS ids, array_agg(made) AS made, \
                       array_agg(first) AS first \
                     FROM (SELECT endpoint_id, count(*) AS made, min(at) AS first \
                       FROM new GROUP BY endpoint_id) g) a, \
                   LATERAL dakghar_ingest_lease(a.ids, a.made, a.first, $18, $19, $20, $21, \
                     $22, $23) l \
                   WHERE $20 > 0), \
                 takes AS ( \
                   SELECT t.endpoint_id, t.n FROM lease l, \
                   unnest(l.take_ids, l.take_counts) AS t(endpoint_id, n)), \
                 made AS ( \
                   INSERT INTO deliveries (id, account_id, event_id, endpoint_id, state, \
                     next_attempt_at, give_up_at, created_at, updated_at, claimed_at, \
                     lease_until, claim_token) \
                   SELECT n.id, n.account_id, n.event_id, n.endpoint_id, \
                     CASE WHEN s.leased THEN 'in_flight' ELSE 'pending' END, n.at, \
                     n.give_up_at, n.at, CASE WHEN s.leased THEN $18 ELSE n.at END, \
                     CASE WHEN s.leased THEN $18 END, CASE WHEN s.leased THEN $19 END, \
                     CASE WHEN s.leased THEN $21 END \
                   FROM new n \
                   CROSS JOIN LATERAL (SELECT n.nth <= COALESCE( \
                     (SELECT t.n FROM takes t WHERE t.endpoint_id = n.endpoint_id), 0) \
                     AS leased) s \
                   RETURNING id, state) \
                 SELECT ARRAY(SELECT account_id FROM kept) AS kept_accounts, \
                   ARRAY(SELECT id FROM kept) AS kept_ids, \
                   ARRAY(SELECT id FROM made) AS made_ids, \
                   ARRAY(SELECT id FROM made WHERE state = 'in_flight') AS leased_ids, \
                   ARRAY(SELECT id FROM active) AS active_keys, \
                   ARRAY(SELECT id FROM fresh) AS fresh_accounts, \
                   l.held_back AS lease_held_back, l.drained AS lease_drained, \
                   l.endpoints_json AS lease_endpoints, o.* \
                 FROM (SELECT 1) one \
                 LEFT JOIN lease l ON true \
                 LEFT JOIN LATERAL unnest(l.older) o ON true";
    let targets: Vec<&Target> = known.values().flat_map(|f| &f.targets).collect();
    let planned = ingest::fan_out_planned(items, &targets);
    let rows = ingest::new_deliveries(&planned);
    let versions: Vec<(&String, i64)> = match checked {
        true => known.iter().map(|(a, f)| (a, f.version)).collect(),
        false => Vec::new(),
    };
    let (terms, token) = match lease {
        Some((terms, token)) => (Some(terms), Some(token)),
        None => (None, None),
    };
    let answer = sqlx::query(write)
        .bind(column(items, |n| n.event.account_id.clone()))
        .bind(column(items, |n| n.event.id.clone()))
        .bind(column(items, |n| n.event.event_type.clone()))
        .bind(column(items, |n| n.event.payload.clone()))
        .bind(column(items, |n| n.now.millis()))
        .bind(column(items, |n| n.traceparent.clone()))
        .bind(column(&targets, |e| e.id.clone()))
        .bind(column(&rows, |d| d.id.clone()))
        .bind(column(&rows, |d| d.account_id.clone()))
        .bind(column(&rows, |d| d.event_id.clone()))
        .bind(column(&rows, |d| d.endpoint_id.clone()))
        .bind(column(&rows, |d| d.created_at))
        .bind(column(&rows, |d| d.give_up_at))
        .bind(ingest::keys(items))
        .bind(column(items, |n| n.key_id.clone()))
        .bind(column(&versions, |(a, _)| a.to_string()))
        .bind(column(&versions, |(_, v)| *v))
        .bind(terms.map(|t| t.now.millis()))
        .bind(terms.map(|t| t.lease_until.millis()))
        .bind(terms.map_or(0, |t| t.limit))
        .bind(token)
        .bind(terms.map(|t| t.rules.default_rate))
        .bind(terms.map(|t| t.rules.host_cap))
        .fetch_all(&mut **conn)
        .await?;
    let first = answer.first().ok_or(sqlx::Error::RowNotFound)?;
    let kept_accounts: Vec<String> = first.try_get("kept_accounts")?;
    let kept_ids: Vec<String> = first.try_get("kept_ids")?;
    let made: Vec<String> = first.try_get("made_ids")?;
    let active: Vec<String> = first.try_get("active_keys")?;
    let fresh: HashSet<String> = first
        .try_get::<Vec<String>, _>("fresh_accounts")?
        .into_iter()
        .collect();
    // Its new rows it wrote in flight, as the statement wrote them.
    let new_leased: Vec<Delivery> = match lease {
        Some((terms, token)) => {
            let leased: HashSet<String> = first
                .try_get::<Vec<String>, _>("leased_ids")?
                .into_iter()
                .collect();
            rows.iter()
                .filter(|d| leased.contains(&d.id))
                .map(|d| ingest::in_flight(d, terms.now, terms.lease_until, token))
                .collect()
        }
        None => Vec::new(),
    };
    let stale = versions
        .iter()
        .map(|(a, _)| a.to_string())
        .filter(|a| !fresh.contains(a))
        .collect();
    let kept = kept_accounts.into_iter().zip(kept_ids).collect();
    let answers = ingest::as_written(
        items,
        planned,
        &kept,
        &active.into_iter().collect(),
        &made.into_iter().collect(),
    );
    let Some((terms, token)) = lease else {
        return Ok((answers, stale, Claim::default()));
    };
    // Older due rows it leased first, one a row of the answer. The
    // statement has committed: a row that will not decode is a fault in
    // the data, so what it leased is handed back and the events are still
    // answered, as on SQLite.
    let older: std::result::Result<Vec<Delivery>, sqlx::Error> = answer
        .iter()
        .filter(|row| matches!(row.try_get::<Option<String>, _>("id"), Ok(Some(_))))
        .map(Delivery::from_row)
        .collect();
    let older = match older {
        Ok(older) => older,
        Err(e) => {
            tracing::error!(error = %e, "leased rows that will not decode; handing them back");
            if let Err(e) = sqlx::query(&HAND_BACK_CLAIM)
                .bind(terms.now.millis())
                .bind(token)
                .execute(&mut **conn)
                .await
            {
                tracing::warn!(error = %e, "could not hand back the lease; its rows go when it expires");
                conn.suspect();
            }
            return Ok((answers, stale, Claim::default()));
        }
    };
    let mut claim = Claim {
        held_back: first
            .try_get::<Option<bool>, _>("lease_held_back")?
            .unwrap_or(false),
        drained: first
            .try_get::<Option<bool>, _>("lease_drained")?
            .unwrap_or(false),
        ..Claim::default()
    };
    claim.deliveries.extend(new_leased);
    claim.deliveries.extend(older);
    let endpoints: Vec<String> = first
        .try_get::<Option<Vec<String>>, _>("lease_endpoints")?
        .unwrap_or_default();
    for json in endpoints {
        if let Some(endpoint) = endpoint_along(&json, "ingest lease", None) {
            claim
                .read_along
                .endpoints
                .insert(endpoint.id.clone(), endpoint);
        }
    }
    Ok((answers, stale, claim))
}

/// One array parameter for `unnest`: a field of every row.
fn column<R, T>(rows: &[R], field: impl Fn(&R) -> T) -> Vec<T> {
    rows.iter().map(field).collect()
}

// ---- vacuum ------------------------------------------------------------
//
// Every delivery leaves the due index when it is claimed, but its entry
// stays in the index until a vacuum. Claims walk that index from its old
// end, so after a large burn-down each claim steps over every entry left
// behind: measured at a million churned rows, ~6 000 buffers and 15–19 ms
// a claim, against 65 buffers after a plain `VACUUM` (1.7 s). Autovacuum
// gets there eventually, but its naptime (a minute by default) and cost
// throttling leave new events waiting behind slow claims meanwhile.
//
// With deliveries partitioned by state (migration 0022) a claim moves a
// row out of `pending_deliveries` and a result out of
// `in_flight_deliveries`: every row inserted into either leaves dead index
// entries behind when it goes. Postgres's dead-row count undercounts them
// (reading a page prunes its dead rows, not their index entries), so the
// job counts the rows inserted since the last vacuum as well.

/// When a node vacuums the deliveries that are waiting or in flight itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VacuumPolicy {
    /// How often the node looks at the partitions' statistics.
    pub every: Duration,
    /// Vacuum a partition once at least this many rows died or passed
    /// through it since its last vacuum.
    pub dead_rows: i64,
    /// ...and no vacuum (ours or autovacuum's) ran in this long.
    pub min_gap: Duration,
}

impl Default for VacuumPolicy {
    /// Measured in `make bench`: even 80 000 churned rows left claims
    /// walking ~5 800 index pages (5 ms before the first row) at light
    /// load right after a burn-down, so the bar is low and the check
    /// frequent. At 20 000 rows and 5 s, a steady 500 deliveries/s let a
    /// vacuum come only every ~40 s, and every claim in between walked
    /// the dead entries its predecessors left at the front of the due
    /// index: 0.23 ms of the claim's 0.61 went to finding the first due
    /// row (`pg_stat_statements` over the bench's 10 % load), 0.06 ms at
    /// 2 000 rows and 2 s. The job stretches each partition's gap to ten
    /// times its last vacuum's duration, so a big table is never vacuumed
    /// more than a tenth of the time.
    fn default() -> Self {
        VacuumPolicy {
            every: Duration::from_secs(1),
            dead_rows: 2_000,
            min_gap: Duration::from_secs(2),
        }
    }
}

/// The partitions rows pass through (migration 0022); the history is only
/// inserted into, which autovacuum keeps up with.
pub(super) const CHURNED: [&str; 2] = ["pending_deliveries", "in_flight_deliveries"];

/// See `Store::vacuum_if_churned`.
pub(super) async fn vacuum_if_churned(
    pool: &PgPool,
    partition: &str,
    policy: &VacuumPolicy,
) -> Result<Option<i64>> {
    // The name goes into the statement's text: only one of ours does.
    let Some(table) = CHURNED.into_iter().find(|t| *t == partition) else {
        return Err(StoreError::NotFound);
    };
    let (dead, since): (i64, Option<f64>) = sqlx::query_as(
        "SELECT GREATEST(n_dead_tup, n_ins_since_vacuum), \
                EXTRACT(EPOCH FROM now() - GREATEST(last_vacuum, last_autovacuum))::float8 \
         FROM pg_stat_user_tables WHERE relid = $1::regclass",
    )
    .bind(table)
    .fetch_one(pool)
    .await?;
    let recently = since.is_some_and(|s| s < policy.min_gap.as_secs_f64());
    if dead < policy.dead_rows || recently {
        return Ok(None);
    }
    // SKIP_LOCKED: if autovacuum or another node is already at it, that
    // vacuum does the job and this one returns at once. INDEX_CLEANUP
    // ON: the index entries are what this vacuum is for, and by
    // default Postgres skips the indexes when few heap pages hold
    // dead rows, as after a small churn through a big partition.
    sqlx::raw_sql(&format!("VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) {table}"))
        .execute(pool)
        .await?;
    Ok(Some(dead))
}
