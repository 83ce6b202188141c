//! The embedded backend: one SQLite file in WAL mode, one writer at a time.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    path::Path,
    sync::LazyLock,
    time::Duration,
};

use rusqlite::{
    types::{ToSqlOutput, Value, ValueRef},
    Connection, ToSql,
};
use sqlx::{
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
    SqlitePool,
};

use super::{
    claim_rules::ClaimRules,
    completion::{answered, distinct_runs, healthy_endpoints, Completion, Outcome},
    ingest::{self, LeaseTerms, NewIngest},
    parse_options,
    sql::{endpoint_succeeded_set, placeholders, UNCLAIMED},
    Claim, Delivery, DeliveryState, InsertedEvent, Pool, Result, SqliteWriter, Store, StoreError,
};
use crate::clock::Timestamp;

mod checkpoints;
mod writer;

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

/// Each active endpoint whose circuit lets work through and that is not
/// throttled, with how many more deliveries it may start (`free`, may be
/// ≤ 0): a closed circuit allows its adaptive cap (at most
/// `max_in_flight`) in flight, a half-open one a single trial, and a rate
/// limit (the endpoint's, else `$2`; 0 is none) what is left of this
/// second's budget (`rate_windows`, window start `$3`); `slots` is the
/// same without the rate limit. Claims count it
/// under the write lock, so both hold across every process on the file.
/// Postgres's claim function (migration 0031) keeps the same rules. `$1`
/// is now. `claim_slots(k)` numbers the three from `$k`.
fn claim_slots(first: usize) -> String {
    slots_of(&format!("({})", endpoint_terms(first, "")), "")
}

/// `claim_slots`'s terms of each endpoint, from its row and its counts:
/// `(id, host, rate, spent, free)`, `free` not yet within the rate's
/// budget, then the `extra` columns (of `e`, the endpoint).
fn endpoint_terms(first: usize, extra: &str) -> String {
    let (now, rate, window) = (first, first + 1, first + 2);
    format!(
        "SELECT e.id, e.host, COALESCE(e.rate_limit_per_sec, ${rate}) AS rate, \
       COALESCE((SELECT w.used FROM rate_windows w \
                 WHERE w.key = 'start:' || e.id AND w.window_start = ${window}), 0) AS spent, \
       CASE WHEN e.circuit_state <> 'closed' THEN 1 \
            WHEN e.adaptive_cap IS NOT NULL AND e.adaptive_cap < e.max_in_flight THEN e.adaptive_cap \
            ELSE e.max_in_flight END \
         - (SELECT count(*) FROM deliveries b \
            WHERE b.endpoint_id = e.id AND b.state = 'in_flight') AS free{extra} \
     FROM endpoints e \
     WHERE e.state = 'active' AND (e.circuit_state <> 'open' OR e.circuit_open_until <= ${now}) \
       AND (e.throttled_until IS NULL OR e.throttled_until <= ${now})"
    )
}

/// `claim_slots`'s rows of `terms` (`endpoint_terms`' rows, a table or a
/// subquery in parentheses), then the `extra` columns (of `s`, a row of
/// `terms`).
fn slots_of(terms: &str, extra: &str) -> String {
    format!(
        "SELECT s.id, s.host, s.rate, \
       CASE WHEN s.rate > 0 AND s.rate - s.spent < s.free THEN s.rate - s.spent \
            ELSE s.free END AS free, s.free AS slots{extra} \
     FROM {terms} s"
    )
}

/// Endpoints with due work that may start some now, or that are full
/// (`slots` ≤ 0: held back, a claim says so), the longest-waiting first:
/// `(id, host, rate, free, slots, at)`, the parameters of
/// `claim_slots(first)`.
fn open_slots(first: usize) -> String {
    open_slots_where(first, &format!("at <= ${first}"))
}

/// `open_slots` of the endpoints whose row meets `which` (of `at`, the
/// oldest pending delivery's time, and `id`), those with none pending
/// last.
fn open_slots_where(first: usize, which: &str) -> String {
    // Each endpoint's terms materialized: flattened into the expressions
    // that name them, SQLite counted each endpoint's attempts in flight
    // three times and read its rate budget twice. With 1 000 endpoints'
    // work due (1 M rows): 5.9 -> 4.5 ms of CPU a statement, and with a
    // rate limit set (the production default) 8.2 -> 4.0 ms.
    format!(
        "WITH t AS MATERIALIZED ({}) \
         SELECT id, host, rate, free, slots, at FROM ({}) \
         WHERE (free > 0 OR slots <= 0) AND ({which}) ORDER BY at NULLS LAST",
        endpoint_terms(
            first,
            ", (SELECT d.next_attempt_at FROM deliveries d \
               WHERE d.endpoint_id = e.id AND d.state = 'pending' \
               ORDER BY d.next_attempt_at LIMIT 1) AS at"
        ),
        slots_of("t", ", s.at")
    )
}

/// `open_slots(1)` on the direct connection, and also the `n` endpoints
/// `?4`, `?5`, … (an ingest group's, read before it writes its rows)
/// that may start some now or are full, whether or not they have work
/// due.
fn open_slots_and(n: usize) -> String {
    let ids: Vec<String> = (4..4 + n).map(|i| format!("?{i}")).collect();
    numbered(&open_slots_where(
        1,
        &format!("at <= $1 OR id IN ({})", ids.join(", ")),
    ))
}

/// Whether any endpoint whose `claim_slots(1)` row meets `rule` has due
/// work.
fn any_with_due_where(rule: &str) -> String {
    format!(
        "SELECT 1 FROM ({}) s WHERE {rule} AND EXISTS ( \
           SELECT 1 FROM deliveries d WHERE d.endpoint_id = s.id AND d.state = 'pending' \
             AND d.next_attempt_at <= $1) LIMIT 1",
        claim_slots(1)
    )
}

/// Whether any endpoint has a free slot and due work.
static ANY_OPEN_SLOT: LazyLock<String> = LazyLock::new(|| any_with_due_where("free > 0"));

/// Whether any full endpoint has due work: asked only when no endpoint
/// can start any, so that such a claim still says it held work back.
static ANY_FULL_WITH_DUE: LazyLock<String> = LazyLock::new(|| any_with_due_where("slots <= 0"));

/// Runs one of the probes above on the reader, with `claim_slots`'s
/// parameters.
async fn probe(reader: &SqlitePool, sql: &str, now: Timestamp, rules: ClaimRules) -> Result<bool> {
    Ok(sqlx::query(sql)
        .bind(now.millis())
        .bind(rules.default_rate)
        .bind(rules.rate_window(now))
        .fetch_optional(reader)
        .await?
        .is_some())
}

/// Spends starts of rate budgets: what claim `?1` leased of each of `n`
/// rate-limited endpoints (`?3`, `?4`, …), in window `?2`; a new window
/// starts from nothing. Counted from the rows themselves (the in-flight
/// rows of those endpoints, by token): one statement for every endpoint
/// a claim leased from. The claim checks the budgets first, under the
/// same lock.
fn spend_rates(n: usize) -> String {
    let ids: Vec<String> = (3..3 + n).map(|i| format!("?{i}")).collect();
    format!(
        "INSERT INTO rate_windows (key, window_start, used) \
         SELECT 'start:' || endpoint_id, ?2, count(*) FROM deliveries \
         WHERE state = 'in_flight' AND claim_token = ?1 AND endpoint_id IN ({}) \
         GROUP BY endpoint_id \
         ON CONFLICT (key) DO UPDATE SET \
           used = CASE WHEN rate_windows.window_start = excluded.window_start \
                       THEN rate_windows.used + excluded.used ELSE excluded.used END, \
           window_start = excluded.window_start",
        ids.join(", ")
    )
}

/// Attempts in flight per receiver host, for the per-host cap:
/// `(host, count)`.
const HOSTS_IN_FLIGHT: &str = "SELECT e.host, count(*) FROM deliveries d \
     JOIN endpoints e ON e.id = d.endpoint_id \
     WHERE d.state = 'in_flight' AND e.host IS NOT NULL GROUP BY e.host";

/// Most endpoints one lease statement names (SQLite allows 500 parts to
/// a compound SELECT).
const LEASE_ENDPOINTS: usize = 50;

/// Leases each of `n` endpoints' oldest due deliveries, as many as it is
/// given (endpoint `?4`, `?5` rows; `?6`, `?7`; …), to claim `?3` until
/// `?2` (`?1` now), in the statement that finds them.
fn lease_due(n: usize) -> String {
    let parts: Vec<String> = (0..n)
        .map(|k| {
            format!(
                "SELECT id FROM (SELECT id FROM deliveries \
                   WHERE endpoint_id = ?{} AND state = 'pending' AND next_attempt_at <= ?1 \
                   ORDER BY next_attempt_at, id LIMIT ?{})",
                4 + 2 * k,
                5 + 2 * k
            )
        })
        .collect();
    format!(
        "UPDATE deliveries SET state = 'in_flight', claimed_at = ?1, lease_until = ?2, \
           claim_token = ?3, updated_at = ?1 \
         WHERE id IN ({}) RETURNING *",
        parts.join(" UNION ALL ")
    )
}

/// An endpoint a claim leases from: how many rows it asks for, within
/// how many free slots.
struct Take {
    endpoint_id: String,
    host: Option<String>,
    rate: i64,
    slots: i64,
    take: i64,
    /// How many it could start now, were the claim's limit no bound.
    startable: i64,
}

/// The endpoints give their oldest due rows, the longest-waiting endpoint
/// first, each as many as its free slots and what is left of `limit`
/// allow, and the same transaction leases them: a claim reads about
/// `limit` rows however deep the queue and however many endpoints wait.
/// `BEGIN IMMEDIATE` takes SQLite's one write lock first, so no other
/// claim (from any process on the file) sees the same slots or rows.
pub(super) async fn claim_due(
    reader: &SqlitePool,
    writer: &Writer,
    now: Timestamp,
    lease_until: Timestamp,
    limit: i64,
    rules: ClaimRules,
    token: &str,
) -> Result<Claim> {
    // Most polls and wakes find nothing due: learn that from a plain read
    // before taking the one writer. (On Postgres the same probe measured
    // slower than just claiming.)
    if !probe(reader, &ANY_OPEN_SLOT, now, rules).await? {
        return Ok(Claim {
            held_back: probe(reader, &ANY_FULL_WITH_DUE, now, rules).await?,
            ..Claim::default()
        });
    }
    let terms = LeaseTerms {
        now,
        lease_until,
        limit,
        rules,
    };
    writer
        .direct(|tx| lease_due_within_rules(tx, terms, token))
        .await
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

/// A row of `deliveries`, by column name.
fn delivery(row: &rusqlite::Row<'_>) -> rusqlite::Result<Delivery> {
    let state: String = row.get("state")?;
    let state = DeliveryState::parse(&state).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            row.as_ref().column_index("state").unwrap_or(0),
            rusqlite::types::Type::Text,
            format!("unknown delivery state {state:?}").into(),
        )
    })?;
    Ok(Delivery {
        id: row.get("id")?,
        account_id: row.get("account_id")?,
        event_id: row.get("event_id")?,
        endpoint_id: row.get("endpoint_id")?,
        state,
        attempts: row.get("attempts")?,
        attempt_seq: row.get("attempt_seq")?,
        next_attempt_at: row.get("next_attempt_at")?,
        give_up_at: row.get("give_up_at")?,
        claimed_at: row.get("claimed_at")?,
        claim_token: row.get("claim_token")?,
        lease_until: row.get("lease_until")?,
        last_status: row.get("last_status")?,
        last_response: bytes(row, "last_response")?,
        last_error: row.get("last_error")?,
        finished_at: row.get("finished_at")?,
        created_at: row.get("created_at")?,
        updated_at: row.get("updated_at")?,
    })
}

/// A column of bytes as sqlx reads one: a blob, or text as its bytes.
fn bytes(row: &rusqlite::Row<'_>, column: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    Ok(match row.get_ref(column)? {
        ValueRef::Null => None,
        ValueRef::Blob(b) | ValueRef::Text(b) => Some(b.to_vec()),
        other => {
            return Err(rusqlite::Error::FromSqlConversionFailure(
                row.as_ref().column_index(column)?,
                other.data_type(),
                "not bytes".into(),
            ))
        }
    })
}

/// `open_slots(1)` for the direct connection, built once: every claim
/// that finds an open slot runs it.
static OPEN_SLOTS_DIRECT: LazyLock<String> = LazyLock::new(|| numbered(&open_slots(1)));

/// An endpoint as `open_slots` reads it.
struct Open {
    endpoint_id: String,
    host: Option<String>,
    rate: i64,
    free: i64,
    slots: i64,
    /// Its oldest pending delivery's time; `None` when none is pending.
    at: Option<i64>,
}

/// Runs an `open_slots` statement with `claim_slots(1)`'s parameters and
/// then `ids`.
fn read_open(tx: &Connection, sql: &str, terms: LeaseTerms, ids: &[&str]) -> Result<Vec<Open>> {
    let mut args = Args::default();
    args.int(terms.now.millis());
    args.int(terms.rules.default_rate);
    args.int(terms.rules.rate_window(terms.now));
    for id in ids {
        args.add(id)?;
    }
    query(tx, sql, &args, |r| {
        Ok(Open {
            endpoint_id: r.get(0)?,
            host: r.get(1)?,
            rate: r.get(2)?,
            free: r.get(3)?,
            slots: r.get(4)?,
            at: r.get(5)?,
        })
    })
}

/// The claim itself, in the caller's transaction on the direct
/// connection: the rows leased within every endpoint's slots, rate and
/// circuit and every host's cap, longest-waiting endpoint first.
fn lease_due_within_rules(tx: &Connection, terms: LeaseTerms, token: &str) -> Result<Claim> {
    let open = read_open(tx, &OPEN_SLOTS_DIRECT, terms, &[])?;
    let rounds = lease_rounds(tx, terms, open, None, token, &mut Source::Due)?;
    spend_starts(tx, token, terms, &rounds.rated)?;
    Ok(rounds.claim)
}

/// Where a claim's rows come from.
enum Source<'a> {
    /// The table: each endpoint's oldest due rows, leased by `lease_due`.
    Due,
    /// An ingest group's own new rows, not yet written, by endpoint in
    /// the order a claim would take them: what is taken of them is
    /// written in flight. Only for a group none of whose endpoints has
    /// older work due.
    New(HashMap<&'a str, VecDeque<&'a Delivery>>),
}

/// What a claim's rounds leased, and the rate-limited endpoints whose
/// starts it must spend (`spend_starts`) once its rows are written.
struct Rounds {
    claim: Claim,
    rated: Vec<String>,
}

/// Leases from the `open` endpoints, in their order (the longest-waiting
/// first), within every endpoint's slots, rate and circuit and every
/// host's cap.
/// For an ingest `group` (how many deliveries it made for each
/// endpoint), only of the endpoints it made deliveries for, and for each
/// at most one more than it made: getting fewer says no older work waits
/// there, so the claim can say whether it left anything due
/// (`Claim::drained`).
fn lease_rounds(
    tx: &Connection,
    terms: LeaseTerms,
    open: Vec<Open>,
    group: Option<&HashMap<&str, i64>>,
    token: &str,
    source: &mut Source<'_>,
) -> Result<Rounds> {
    let LeaseTerms {
        now,
        lease_until,
        limit,
        rules,
    } = terms;
    let mut hosts: HashMap<String, i64> = HashMap::new();
    if rules.host_cap > 0 {
        hosts.extend(query(tx, HOSTS_IN_FLIGHT, &Args::default(), |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })?);
    }
    let mut deliveries: Vec<Delivery> = Vec::new();
    // The rate-limited endpoints the claim asked: their starts are spent
    // before its commit.
    let mut rated: Vec<String> = Vec::new();
    let mut held_back = false;
    // Due work the claim's limit left that could start now.
    let mut left_startable = false;
    let mut unasked = open;
    // Each round asks every endpoint it can for as many rows as it may
    // start (of a group's endpoints, at most one more than it made), as
    // though each had that many due; one that had fewer leaves room to
    // the endpoints the round could not ask (the claim's limit was spoken
    // for, or their host's cap), which the next asks.
    loop {
        let mut left = limit - deliveries.len() as i64;
        let mut round: Vec<Take> = Vec::new();
        let mut later = Vec::new();
        for o in unasked {
            let made = match group.map(|g| g.get(o.endpoint_id.as_str())) {
                None => None,
                Some(Some(&made)) => Some(made),
                // Another endpoint's due work: the claim loops'.
                Some(None) => {
                    left_startable |= o.free > 0;
                    held_back |= o.slots <= 0;
                    continue;
                }
            };
            let host_asked = rules.host_cap > 0
                && o.host
                    .as_ref()
                    .is_some_and(|h| round.iter().any(|t| t.host.as_ref() == Some(h)));
            if left <= 0 || round.len() == LEASE_ENDPOINTS || host_asked {
                later.push(o);
                continue;
            }
            let host_free = match (&o.host, rules.host_cap > 0) {
                (Some(h), true) => rules.host_cap - hosts.get(h).copied().unwrap_or(0),
                _ => i64::MAX,
            };
            let slots = o.slots.min(host_free);
            if slots <= 0 {
                held_back = true;
                continue;
            }
            let startable = o.free.min(host_free);
            let take = startable.min(left).min(made.map_or(i64::MAX, |m| m + 1));
            if take <= 0 {
                continue;
            }
            left -= take;
            round.push(Take {
                endpoint_id: o.endpoint_id,
                host: o.host,
                rate: o.rate,
                slots,
                take,
                startable,
            });
        }
        if round.is_empty() {
            left_startable |= !later.is_empty();
            break;
        }
        rated.extend(
            round
                .iter()
                .filter(|t| t.rate > 0)
                .map(|t| t.endpoint_id.clone()),
        );
        let leased = match source {
            Source::Due => match lease_round(tx, &round, terms, token)? {
                Some(leased) => leased,
                // What it held back still waits for a slot.
                None => {
                    return Ok(Rounds {
                        claim: Claim {
                            held_back,
                            ..Claim::default()
                        },
                        rated: Vec::new(),
                    })
                }
            },
            Source::New(rows) => {
                let mut leased = Vec::new();
                for t in &round {
                    if let Some(rows) = rows.get_mut(t.endpoint_id.as_str()) {
                        let n = rows.len().min(t.take as usize);
                        leased.extend(
                            rows.drain(..n)
                                .map(|d| in_flight(d, now, lease_until, token)),
                        );
                    }
                }
                leased
            }
        };
        let counted_hosts = (rules.host_cap > 0).then_some(&mut hosts);
        count_round(
            &round,
            &leased,
            counted_hosts,
            &mut held_back,
            &mut left_startable,
        );
        deliveries.extend(leased);
        unasked = later;
    }
    Ok(Rounds {
        claim: Claim {
            deliveries,
            held_back,
            drained: !left_startable,
            ..Claim::default()
        },
        rated,
    })
}

/// A new delivery as a claim at `now` leases it.
fn in_flight(d: &Delivery, now: Timestamp, lease_until: Timestamp, token: &str) -> Delivery {
    Delivery {
        state: DeliveryState::InFlight,
        claimed_at: Some(now.millis()),
        lease_until: Some(lease_until.millis()),
        claim_token: Some(token.to_string()),
        updated_at: now.millis(),
        ..d.clone()
    }
}

/// One round's rows from the table, leased in the statement that finds
/// them; `None` when they would not decode (handed back).
fn lease_round(
    tx: &Connection,
    round: &[Take],
    terms: LeaseTerms,
    token: &str,
) -> Result<Option<Vec<Delivery>>> {
    let mut lease = Args::default();
    lease.int(terms.now.millis());
    lease.int(terms.lease_until.millis());
    lease.add(&token)?;
    for t in round {
        lease.add(&t.endpoint_id)?;
        lease.int(t.take);
    }
    // Read raw and decoded after: a row that will not decode is a
    // fault in the data, not in the claim.
    let rows = query(tx, &lease_due(round.len()), &lease, |r| Ok(delivery(r)))?;
    match rows.into_iter().collect::<rusqlite::Result<Vec<_>>>() {
        Ok(leased) => Ok(Some(leased)),
        Err(e) => {
            hand_back_undecodable(tx, token, terms.now, &e.into())?;
            Ok(None)
        }
    }
}

/// Spends the rate budgets of what a claim leased from the `rated`
/// endpoints, its rows written. The claim read the budgets once, at its
/// start, and asks an endpoint at most once, so no round depends on what
/// an earlier one spent: one statement spends them all.
fn spend_starts(tx: &Connection, token: &str, terms: LeaseTerms, rated: &[String]) -> Result<()> {
    if rated.is_empty() {
        return Ok(());
    }
    let mut spend = Args::default();
    spend.add(&token)?;
    spend.int(terms.rules.rate_window(terms.now));
    for id in rated {
        spend.add(id)?;
    }
    execute(tx, &spend_rates(rated.len()), &spend)?;
    Ok(())
}

/// What one round of a claim leased says of the endpoints it asked, and
/// adds to each host's attempts in flight (`hosts`, when a later round
/// of the claim reads them for the per-host cap).
fn count_round(
    round: &[Take],
    leased: &[Delivery],
    mut hosts: Option<&mut HashMap<String, i64>>,
    held_back: &mut bool,
    left_startable: &mut bool,
) {
    for t in round {
        let n = leased
            .iter()
            .filter(|d| d.endpoint_id == t.endpoint_id)
            .count() as i64;
        // Every free slot taken: more may wait for one (or none did; the
        // wake-up that costs is one claim).
        *held_back |= n >= t.slots;
        // As many as it asked, fewer than it could start: more may be due.
        *left_startable |= n == t.take && t.take < t.startable;
        if let (Some(h), Some(hosts)) = (&t.host, hosts.as_deref_mut()) {
            *hosts.entry(h.clone()).or_insert(0) += n;
        }
    }
}

/// A claim leased rows that will not decode (a fault in the data, not in
/// the claim): it hands every row it leased back as it was, in the same
/// transaction, which still commits, and its caller gets nothing to
/// attempt. An ingest group's events are still written, and no rate
/// budget is spent.
fn hand_back_undecodable(
    tx: &Connection,
    token: &str,
    now: Timestamp,
    fault: &StoreError,
) -> Result<()> {
    tracing::error!(error = %fault, "claimed rows that will not decode; handing them back");
    let mut args = Args::default();
    args.int(now.millis());
    args.add(&token)?;
    execute(
        tx,
        &format!(
            "UPDATE deliveries SET state = 'pending', {UNCLAIMED}, updated_at = ? \
             WHERE state = 'in_flight' AND claim_token = ?"
        ),
        &args,
    )?;
    Ok(())
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
    let mut accounts = ingest::accounts(batch);
    // The list padded to a power of two with its last id: each length is
    // one more text in the statement cache.
    let padded = accounts.len().next_power_of_two();
    if let Some(last) = accounts.last().cloned() {
        accounts.resize(padded, last);
    }
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
    let Some(mut terms) = lease.filter(|_| !new.is_empty()) else {
        write_deliveries(tx, &new, &HashMap::new())?;
        return Ok((results, Claim::default()));
    };
    // Due as of the latest of the group's own times: a wall clock
    // stepped back since would hide them from the lease, which would
    // then say it left nothing due.
    let newest = batch.iter().map(|n| n.now).max();
    terms.now = newest.map_or(terms.now, |n| n.max(terms.now));
    let claim = lease_group(tx, terms, &new, token)?;
    Ok((results, claim))
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
    let mut made: HashMap<&str, i64> = HashMap::new();
    for d in new {
        *made.entry(d.endpoint_id.as_str()).or_default() += 1;
    }
    let mut ids: Vec<&str> = made.keys().copied().collect();
    // Sorted and padded to a power of two with its last id: each length
    // is one more text in the statement cache.
    ids.sort_unstable();
    if let Some(&last) = ids.last() {
        ids.resize(ids.len().next_power_of_two(), last);
    }
    let mut open = read_open(tx, &open_slots_and(ids.len()), terms, &ids)?;
    let now = terms.now.millis();
    let older_due = open
        .iter()
        .any(|o| made.contains_key(o.endpoint_id.as_str()) && o.at.is_some_and(|at| at <= now));
    // Each endpoint's oldest pending row as it will be once the group's
    // are written, so the longest-waiting endpoint is still asked first
    // when the claim's limit or a host's cap leaves some for later.
    let mut oldest_new: HashMap<&str, i64> = HashMap::new();
    for d in new {
        let at = oldest_new.entry(d.endpoint_id.as_str()).or_insert(i64::MAX);
        *at = (*at).min(d.next_attempt_at);
    }
    for o in &mut open {
        if let Some(&first) = oldest_new.get(o.endpoint_id.as_str()) {
            o.at = Some(o.at.map_or(first, |at| at.min(first)));
        }
    }
    open.sort_by_key(|o| o.at.unwrap_or(i64::MAX));
    let rounds = if older_due {
        write_deliveries(tx, new, &HashMap::new())?;
        lease_rounds(tx, terms, open, Some(&made), token, &mut Source::Due)?
    } else {
        let mut oldest_first = new.to_vec();
        oldest_first.sort_by(|a, b| (a.next_attempt_at, &a.id).cmp(&(b.next_attempt_at, &b.id)));
        let mut by_endpoint: HashMap<&str, VecDeque<&Delivery>> = HashMap::new();
        for d in oldest_first {
            by_endpoint
                .entry(d.endpoint_id.as_str())
                .or_default()
                .push_back(d);
        }
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
