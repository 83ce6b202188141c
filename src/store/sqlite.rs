//! The embedded backend: one SQLite file in WAL mode, one writer at a time.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    path::Path,
    time::Duration,
};

use rusqlite::{
    types::{ToSqlOutput, Value, ValueRef},
    Connection, ToSql,
};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::{
    completion::{answered, distinct_runs, healthy_endpoints, Completion, Outcome},
    ingest::{self, LeaseTerms, NewIngest},
    parse_options,
    sql::{endpoint_succeeded_set, placeholders, UNCLAIMED},
    Claim, Delivery, Endpoint, InsertedEvent, Pool, Result, SqliteWriter, Store, StoreError,
};

mod checkpoints;
mod claims;
mod rows;
mod writer;

pub(super) use claims::claim_due;
use claims::{lease_rounds, open_slots_and, read_open, spend_starts, Source};
use rows::{endpoint, ENDPOINT_COLUMNS};
pub(crate) use writer::Writer;

/// Short enough that a producer hears 503 and retries instead of
/// hanging while another process holds the file locked: its write may
/// queue for the one writer connection behind a claim and a batch of
/// results that each wait this long first, and all three must fit in the
/// 10 s a producer is promised (at 5 s each,
/// `faults::ten_seconds_without_the_database_lose_nothing` saw 503 only
/// after 10 s when the three lined up).
const BUSY_TIMEOUT: Duration = Duration::from_secs(3);

pub async fn connect(url: &str, max_connections: u32) -> Result<Store> {
    let options: SqliteConnectOptions = parse_options(url)?;
    let path = options.get_filename().to_path_buf();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Connect {
            url: url.to_string(),
            cause: format!("cannot create directory {}: {e}", dir.display()),
        })?;
    }
    let options = options
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // WAL + NORMAL survives a process crash; only power loss can drop the last commits.
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true);
    let connect_error = |e: sqlx::Error| StoreError::Connect {
        url: display_path(&path),
        cause: e.to_string(),
    };
    // Not pinged before each use: a connection to a local file does not
    // drop, and the ping was one more round trip to sqlx's SQLite thread
    // before every transaction (it still pings on release).
    let pool = SqlitePoolOptions::new()
        .max_connections(max_connections)
        .test_before_acquire(false)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options.clone())
        .await
        .map_err(connect_error)?;
    let writer =
        Writer::connect(&options, BUSY_TIMEOUT)
            .await
            .map_err(|e| StoreError::Connect {
                url: display_path(&path),
                cause: e.to_string(),
            })?;
    Ok(Store {
        pg_warm: None,
        pool: Pool::Sqlite(pool),
        writer: Some(SqliteWriter {
            conn: writer,
            claim_turn: Default::default(),
        }),
        pg_schema: None,
        secrets: None,
        node: None,
        fan_outs: super::fan_outs::empty(),
    })
}

fn display_path(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// A statement's arguments for the direct connection: text and blobs
/// borrowed from what is written, numbers owned.
#[derive(Default)]
struct Args<'a>(Vec<ToSqlOutput<'a>>);

impl<'a> Args<'a> {
    fn add(&mut self, value: &'a dyn ToSql) -> Result<()> {
        self.0.push(value.to_sql()?);
        Ok(())
    }

    fn int(&mut self, value: i64) {
        self.0.push(ToSqlOutput::Owned(Value::Integer(value)));
    }

    fn opt_int(&mut self, value: Option<i64>) {
        self.0.push(ToSqlOutput::Owned(
            value.map_or(Value::Null, Value::Integer),
        ));
    }

    fn text(&mut self, value: &'a str) {
        self.0
            .push(ToSqlOutput::Borrowed(ValueRef::Text(value.as_bytes())));
    }
}

/// Runs `sql` with `args` on the direct connection (its statement cached).
fn execute(tx: &Connection, sql: &str, args: &Args<'_>) -> Result<usize> {
    Ok(tx
        .prepare_cached(sql)?
        .execute(rusqlite::params_from_iter(&args.0))?)
}

/// `sql`'s rows, each read by `row`.
fn query<T>(
    tx: &Connection,
    sql: &str,
    args: &Args<'_>,
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = tx.prepare_cached(sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(&args.0), row)?;
    Ok(rows.collect::<rusqlite::Result<Vec<T>>>()?)
}

/// `sql` with its `$N` parameters as `?N`: SQLite numbers `$N` in the
/// order they first appear (sqlx binds them by name), `?N` as written,
/// which is how the direct connection binds.
fn numbered(sql: &str) -> String {
    sql.replace('$', "?")
}

/// `Store::complete_attempts` in statements of up to `INSERT_CHUNK`
/// results, and one for the endpoints that delivered, in one transaction
/// on the direct connection. A chunk names each delivery once
/// (`distinct_runs`), so the held ids it reads say which of its results
/// held their claims.
pub(super) async fn complete_attempts(
    writer: &Writer,
    batch: &[Completion],
) -> Result<Vec<Result<Delivery>>> {
    writer.direct(|tx| record_batch(tx, batch)).await
}

fn record_batch(tx: &Connection, batch: &[Completion]) -> Result<Vec<Result<Delivery>>> {
    let mut written: Vec<&Completion> = Vec::with_capacity(batch.len());
    let mut answers = Vec::with_capacity(batch.len());
    let runs = distinct_runs(batch);
    for chunk in runs.iter().flat_map(|run| run.chunks(INSERT_CHUNK)) {
        let moved = record_chunk(tx, chunk)?;
        written.extend(chunk.iter().filter(|c| moved.contains(&c.claimed.id)));
        answers.extend(answered(chunk, &moved));
    }
    let healthy = healthy_endpoints(&written);
    if !healthy.is_empty() {
        let sql = format!(
            "WITH h (id, at, delivered, first_started) AS (VALUES {}) \
             UPDATE endpoints SET {} FROM h WHERE endpoints.id = h.id",
            rows(healthy.len(), "(?, ?, ?, ?)"),
            endpoint_succeeded_set("h.at", "h.delivered", "h.first_started")
        );
        let mut args = Args::default();
        for h in &healthy {
            args.add(&h.endpoint_id)?;
            args.int(h.at.millis());
            args.int(h.delivered);
            args.int(h.first_started);
        }
        execute(tx, &sql, &args)?;
    }
    Ok(answers)
}

/// Writes the attempts of `chunk` whose claims are still held and moves
/// their deliveries to the state each result leaves: which claims are
/// held is read first, and the attempts and the update ask the same of
/// the same rows under the same lock. Answers the ids it moved.
fn record_chunk(tx: &Connection, chunk: &[Completion]) -> Result<HashSet<String>> {
    let mut held = Args::default();
    for c in chunk {
        held.add(&c.claimed.id)?;
        held.add(&c.claimed.claim_token)?;
    }
    let moved: HashSet<String> = query(
        tx,
        &format!(
            "WITH r (id, token) AS (VALUES {}) \
             SELECT d.id FROM r JOIN deliveries d ON d.id = r.id \
               AND d.state = 'in_flight' AND d.claim_token = r.token",
            rows(chunk.len(), "(?, ?)")
        ),
        &held,
        |r| r.get(0),
    )?
    .into_iter()
    .collect();
    let mut attempts = Args::default();
    for c in chunk {
        let (claimed, record) = (&c.claimed, &c.record);
        attempts.add(&claimed.id)?;
        attempts.add(&claimed.claim_token)?;
        attempts.int(record.attempt);
        attempts.int(record.started_at);
        attempts.int(record.duration_ms);
        attempts.add(&record.request_headers)?;
        attempts.add(&record.response_status)?;
        attempts.add(&record.response_headers)?;
        attempts.add(&record.response_body)?;
        attempts.add(&record.error)?;
        attempts.add(&record.classification)?;
        attempts.add(&claimed.endpoint_id)?;
    }
    execute(
        tx,
        &format!(
            "WITH r (delivery_id, token, attempt, started_at, duration_ms, request_headers, \
                 response_status, response_headers, response_body, error, classification, \
                 endpoint_id) AS (VALUES {}) \
             INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, \
               request_headers, response_status, response_headers, response_body, error, \
               classification, endpoint_id) \
             SELECT r.delivery_id, r.attempt, r.started_at, r.duration_ms, r.request_headers, \
               r.response_status, r.response_headers, r.response_body, r.error, \
               r.classification, r.endpoint_id \
             FROM r JOIN deliveries d ON d.id = r.delivery_id AND d.state = 'in_flight' \
               AND d.claim_token = r.token",
            rows(chunk.len(), "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        ),
        &attempts,
    )?;
    let mut update = Args::default();
    for c in chunk {
        let (claimed, record) = (&c.claimed, &c.record);
        let Outcome {
            state,
            counted,
            next_at,
            finished_at,
        } = c.outcome();
        update.add(&claimed.id)?;
        update.add(&claimed.claim_token)?;
        update.text(state.as_str());
        update.int(counted);
        update.int(record.attempt);
        update.int(next_at);
        update.add(&record.response_status)?;
        update.add(&record.response_body)?;
        update.add(&record.error)?;
        update.opt_int(finished_at);
        update.int(c.now.millis());
    }
    execute(
        tx,
        &format!(
            "WITH r (id, token, state, counted, seq, next_at, status, body, error, finished_at, at) \
               AS (VALUES {}) \
             UPDATE deliveries SET state = r.state, attempts = deliveries.attempts + r.counted, \
               attempt_seq = r.seq, next_attempt_at = r.next_at, {UNCLAIMED}, \
               last_status = r.status, last_response = r.body, last_error = r.error, \
               finished_at = r.finished_at, updated_at = r.at \
             FROM r WHERE deliveries.id = r.id AND deliveries.state = 'in_flight' \
               AND deliveries.claim_token = r.token",
            rows(chunk.len(), "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        ),
        &update,
    )?;
    Ok(moved)
}

/// Rows per multi-row INSERT: a fixed chunk keeps the statement caches
/// to a few texts.
const INSERT_CHUNK: usize = 50;

/// `row` (a parenthesized list of `?`) `n` times, for a multi-row
/// statement, its parameters bound by position.
fn rows(n: usize, row: &str) -> String {
    vec![row; n].join(", ")
}

/// `n` plain parameters, `?, ?, …`, for sqlx: it looks up each
/// parameter's name before binding it, and SQLite finds a numbered one's
/// by walking the statement's list of them (binding 550 `$N` cost
/// 150 000 steps).
pub(super) fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// `Store::insert_events` in multi-row statements of `INSERT_CHUNK` rows,
/// in one transaction on the direct connection.
pub(super) async fn insert_events(
    writer: &Writer,
    batch: &[NewIngest],
    lease: Option<LeaseTerms>,
    token: &str,
) -> Result<(Vec<Result<InsertedEvent>>, Claim)> {
    writer
        .direct(|tx| insert_group(tx, batch, lease, token))
        .await
}

fn insert_group(
    tx: &Connection,
    batch: &[NewIngest],
    lease: Option<LeaseTerms>,
    token: &str,
) -> Result<(Vec<Result<InsertedEvent>>, Claim)> {
    let accounts = padded(ingest::accounts(batch));
    let mut args = Args::default();
    for id in &accounts {
        args.add(id)?;
    }
    let targets = query(
        tx,
        &format!(
            "SELECT id, account_id, event_types FROM endpoints \
             WHERE account_id IN ({}) AND state <> 'disabled' ORDER BY created_at, id",
            marks(accounts.len())
        ),
        &args,
        |r| {
            let types: String = r.get(2)?;
            Ok(ingest::Target::new(r.get(0)?, r.get(1)?, &types))
        },
    )?;
    // An event that names its key is written only if the key is active:
    // the check is part of the insert, under the write lock.
    let mut kept = Vec::with_capacity(batch.len());
    for chunk in batch.chunks(INSERT_CHUNK) {
        let mut args = Args::default();
        for n in chunk {
            args.add(&n.event.account_id)?;
            args.add(&n.event.id)?;
            args.add(&n.event.event_type)?;
            args.add(&n.event.payload)?;
            args.int(n.now.millis());
            args.add(&n.traceparent)?;
            args.add(&n.key_id)?;
        }
        kept.extend(query(
            tx,
            &format!(
                "WITH n (account_id, id, event_type, payload, created_at, traceparent, key_id) \
                   AS (VALUES {}) \
                 INSERT INTO events (account_id, id, event_type, payload, created_at, traceparent) \
                 SELECT account_id, id, event_type, payload, created_at, traceparent FROM n \
                 WHERE key_id IS NULL \
                   OR EXISTS (SELECT 1 FROM api_keys k WHERE k.id = n.key_id \
                     AND k.revoked_at IS NULL) \
                   OR EXISTS (SELECT 1 FROM platform_keys k WHERE k.id = n.key_id \
                     AND k.revoked_at IS NULL) \
                 ON CONFLICT DO NOTHING RETURNING account_id, id",
                rows(chunk.len(), "(?, ?, ?, ?, ?, ?, ?)")
            ),
            &args,
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
        )?);
    }
    let keys = ingest::keys(batch);
    // Every event stored: each named an active key, so only a batch that
    // lost some asks which keys are revoked.
    let mut active = HashSet::new();
    if kept.len() == batch.len() {
        active.extend(keys);
    } else {
        for chunk in keys.chunks(INSERT_CHUNK) {
            let mut args = Args::default();
            for id in chunk {
                args.add(id)?;
            }
            active.extend(query(
                tx,
                &format!(
                    "SELECT id FROM api_keys WHERE revoked_at IS NULL AND id IN ({0}) \
                     UNION ALL \
                     SELECT id FROM platform_keys WHERE revoked_at IS NULL AND id IN ({0})",
                    numbered(&placeholders(1, chunk.len()))
                ),
                &args,
                |r| r.get::<_, String>(0),
            )?);
        }
    }
    let targets: Vec<&ingest::Target> = targets.iter().collect();
    let results = ingest::fan_out(batch, &kept, &active, &targets);
    let new = ingest::new_deliveries(&results);
    let Some(terms) = lease.filter(|_| !new.is_empty()) else {
        write_deliveries(tx, &new, &HashMap::new())?;
        return Ok((results, Claim::default()));
    };
    let mut claim = lease_group(tx, terms, &new, token)?;
    claim.read_along.endpoints = endpoints_of(tx, &claim.deliveries)?;
    Ok((results, claim))
}

/// The endpoints of `leased`, as the lease saw them: read here, on the
/// connection in hand, rather than by the attempts' batch through a
/// reader thread after the commit, on the way of every first attempt.
/// A row that will not decode is left to that batch, which says so.
fn endpoints_of(tx: &Connection, leased: &[Delivery]) -> Result<HashMap<String, Endpoint>> {
    if leased.is_empty() {
        return Ok(HashMap::new());
    }
    let mut ids: Vec<&str> = leased.iter().map(|d| d.endpoint_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let ids = padded(ids);
    let mut args = Args::default();
    for id in &ids {
        args.add(id)?;
    }
    let sql = format!(
        "SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE id IN ({})",
        marks(ids.len())
    );
    Ok(query(tx, &sql, &args, |r| Ok(endpoint(r).ok()))?
        .into_iter()
        .flatten()
        .map(|e| (e.id.clone(), e))
        .collect())
}

/// `list` padded to a power of two with its last item: each length of a
/// statement's `IN` list is one more text in the statement cache.
fn padded<T: Clone>(mut list: Vec<T>) -> Vec<T> {
    if let Some(last) = list.last().cloned() {
        list.resize(list.len().next_power_of_two(), last);
    }
    list
}

/// Writes an ingest group's `new` deliveries and leases what it made due
/// as a claim of only its endpoints would (`lease_rounds`). The
/// endpoints are read before the rows are written: when none has older
/// work due, what the group leases is its own new rows, written in
/// flight. (Written pending and then leased, each row's entries in the
/// indexes that read its state were written twice: in SQL alone an
/// event's ingest at a fan-out of 10 took 254–308 µs that way against
/// 165–198, p50.)
fn lease_group(
    tx: &Connection,
    terms: LeaseTerms,
    new: &[&Delivery],
    token: &str,
) -> Result<Claim> {
    // The group's rows by endpoint, each endpoint's oldest first, as a
    // claim would take them.
    let mut oldest_first = new.to_vec();
    oldest_first.sort_by(|a, b| (a.next_attempt_at, &a.id).cmp(&(b.next_attempt_at, &b.id)));
    let mut by_endpoint: HashMap<&str, VecDeque<&Delivery>> = HashMap::new();
    for d in oldest_first {
        by_endpoint
            .entry(d.endpoint_id.as_str())
            .or_default()
            .push_back(d);
    }
    let made: HashMap<&str, i64> = by_endpoint
        .iter()
        .map(|(&id, rows)| (id, rows.len() as i64))
        .collect();
    let ids = padded(made.keys().copied().collect());
    let mut open = read_open(tx, &open_slots_and(ids.len()), terms, &ids)?;
    let now = terms.now.millis();
    let older_due = open
        .iter()
        .any(|o| made.contains_key(o.endpoint_id.as_str()) && o.at.is_some_and(|at| at <= now));
    // Each endpoint's oldest pending row as it will be once the group's
    // are written, so the longest-waiting endpoint is still asked first
    // when the claim's limit or a host's cap leaves some for later.
    for o in &mut open {
        if let Some(first) = by_endpoint
            .get(o.endpoint_id.as_str())
            .and_then(|r| r.front())
        {
            let first = first.next_attempt_at;
            o.at = Some(o.at.map_or(first, |at| at.min(first)));
        }
    }
    open.sort_by_key(|o| o.at.unwrap_or(i64::MAX));
    let rounds = if older_due {
        write_deliveries(tx, new, &HashMap::new())?;
        lease_rounds(tx, terms, open, Some(&made), token, &mut Source::Due)?
    } else {
        let source = &mut Source::New(by_endpoint);
        let rounds = lease_rounds(tx, terms, open, Some(&made), token, source)?;
        let leased: HashMap<&str, &Delivery> = rounds
            .claim
            .deliveries
            .iter()
            .map(|d| (d.id.as_str(), d))
            .collect();
        write_deliveries(tx, new, &leased)?;
        rounds
    };
    spend_starts(tx, token, terms, &rounds.rated)?;
    Ok(rounds.claim)
}

/// Writes new deliveries in chunks of `INSERT_CHUNK`, pending and due at
/// once, but those `leased`, which are written as leased.
fn write_deliveries(
    tx: &Connection,
    new: &[&Delivery],
    leased: &HashMap<&str, &Delivery>,
) -> Result<()> {
    for chunk in new.chunks(INSERT_CHUNK) {
        let mut args = Args::default();
        for &d in chunk {
            let d = leased.get(d.id.as_str()).copied().unwrap_or(d);
            args.add(&d.id)?;
            args.add(&d.account_id)?;
            args.add(&d.event_id)?;
            args.add(&d.endpoint_id)?;
            args.text(d.state.as_str());
            args.int(d.next_attempt_at);
            args.int(d.give_up_at);
            args.int(d.created_at);
            args.int(d.updated_at);
            args.opt_int(d.claimed_at);
            args.opt_int(d.lease_until);
            args.add(&d.claim_token)?;
        }
        execute(
            tx,
            &format!(
                "INSERT INTO deliveries (id, account_id, event_id, endpoint_id, state, \
                   next_attempt_at, give_up_at, created_at, updated_at, claimed_at, \
                   lease_until, claim_token) VALUES {}",
                rows(chunk.len(), "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
            ),
            &args,
        )?;
    }
    Ok(())
}
