//! The embedded backend: one SQLite file in WAL mode, one writer at a time.

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    sync::LazyLock,
    time::Duration,
};

use sqlx::{
    sqlite::{
        SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions,
        SqliteSynchronous,
    },
    Arguments, FromRow, SqlitePool,
};

use super::{
    claim_rules::ClaimRules,
    completion::{answered, distinct_runs, healthy_endpoints, Completion, Outcome},
    ingest::{self, LeaseTerms, NewIngest},
    parse_options,
    sql::{endpoint_succeeded_set, placeholders, UNCLAIMED},
    Claim, Delivery, InsertedEvent, Pool, Result, SqliteWriter, Store, StoreError,
};
use crate::clock::Timestamp;

mod writer;

use writer::WriteTx;
pub(crate) use writer::Writer;

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
        // Short enough that a producer hears 503 and retries instead of
        // hanging while another process holds the file locked: its write
        // may queue for the one writer connection behind a claim and a
        // batch of results that each wait this long first, and all three
        // must fit in the 10 s a producer is promised (at 5 s each,
        // `faults::ten_seconds_without_the_database_lose_nothing` saw
        // 503 only after 10 s when the three lined up).
        .busy_timeout(Duration::from_secs(3))
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
    // The writes' multi-row statements come in a text per row count (1 to
    // `INSERT_CHUNK` for each of ingest's and the results' statements):
    // sqlx's 100 cached statements were evicted and prepared again under
    // mixed load. Bench: ingest alone 4 100-4 650 -> 5 020 events/s.
    let writer = Writer::connect(&options.statement_cache_capacity(1000))
        .await
        .map_err(connect_error)?;
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
/// is now. `claim_slots(k)` numbers the three from `$k`, for a command
/// whose statements before it take `k - 1` parameters.
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
/// `(id, host, rate, free, slots)`, the parameters of `claim_slots(first)`.
fn open_slots(first: usize) -> String {
    // Each endpoint's terms materialized: flattened into the expressions
    // that name them, SQLite counted each endpoint's attempts in flight
    // three times and read its rate budget twice. With 1 000 endpoints'
    // work due (1 M rows): 5.9 -> 4.5 ms of CPU a statement, and with a
    // rate limit set (the production default) 8.2 -> 4.0 ms.
    format!(
        "WITH t AS MATERIALIZED ({}) \
         SELECT id, host, rate, free, slots FROM ({}) \
         WHERE (free > 0 OR slots <= 0) AND at <= ${first} ORDER BY at",
        endpoint_terms(
            first,
            ", (SELECT d.next_attempt_at FROM deliveries d \
               WHERE d.endpoint_id = e.id AND d.state = 'pending' \
               ORDER BY d.next_attempt_at LIMIT 1) AS at"
        ),
        slots_of("t", ", s.at")
    )
}

/// `open_slots` on its own, built once: every claim that finds an open
/// slot runs it.
static OPEN_SLOTS: LazyLock<String> = LazyLock::new(|| open_slots(1));

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

/// Spends starts of rate budgets: what claim `$3` leased of each of `n`
/// rate-limited endpoints (`$k`, `$k+1`, …), in window `$k-1`; a new
/// window starts from nothing. Counted from the rows themselves (the
/// in-flight rows of those endpoints, by token), so it can go out in the
/// command that leases them, before their rows come back. The ids are
/// named (`$k`), as they follow the lease's parameters; at most a batch
/// of them. The claim checks the budgets first, under the same lock.
fn spend_rates(k: usize, n: usize) -> String {
    let ids: Vec<String> = (k..k + n).map(|i| format!("${i}")).collect();
    format!(
        "INSERT INTO rate_windows (key, window_start, used) \
         SELECT 'start:' || endpoint_id, ${window}, count(*) FROM deliveries \
         WHERE state = 'in_flight' AND claim_token = $3 AND endpoint_id IN ({}) \
         GROUP BY endpoint_id \
         ON CONFLICT (key) DO UPDATE SET \
           used = CASE WHEN rate_windows.window_start = excluded.window_start \
                       THEN rate_windows.used + excluded.used ELSE excluded.used END, \
           window_start = excluded.window_start",
        ids.join(", "),
        window = k - 1
    )
}

/// Attempts in flight per receiver host, for the per-host cap, in rows
/// shaped like `open_slots`'s with no id and the count as `free`: it goes
/// out in the same command, a round trip fewer.
const HOSTS_IN_FLIGHT: &str = "SELECT NULL, e.host, 0, count(*), 0 FROM deliveries d \
     JOIN endpoints e ON e.id = d.endpoint_id \
     WHERE d.state = 'in_flight' AND e.host IS NOT NULL GROUP BY e.host";

/// A row of `open_slots`, `(id, host, rate, free, slots)`, or with no id
/// one of `HOSTS_IN_FLIGHT`'s.
type SlotRow = (Option<String>, Option<String>, i64, i64, i64);

/// Most endpoints one lease statement names (SQLite allows 500 parts to
/// a compound SELECT).
const LEASE_ENDPOINTS: usize = 50;

/// Leases each of `n` endpoints' oldest due deliveries, as many as it is
/// given (endpoint `$4`, `$5` rows; `$6`, `$7`; …), to claim `$3` until
/// `$2` (`$1` now), in the statement that finds them: one round trip to
/// sqlx's SQLite thread for all of them.
fn lease_due(n: usize) -> String {
    let parts: Vec<String> = (0..n)
        .map(|k| {
            format!(
                "SELECT id FROM (SELECT id FROM deliveries \
                   WHERE endpoint_id = ${} AND state = 'pending' AND next_attempt_at <= $1 \
                   ORDER BY next_attempt_at, id LIMIT ${})",
                4 + 2 * k,
                5 + 2 * k
            )
        })
        .collect();
    format!(
        "UPDATE deliveries SET state = 'in_flight', claimed_at = $1, lease_until = $2, \
           claim_token = $3, updated_at = $1 \
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
    let tx = writer.begin().await?;
    let terms = LeaseTerms {
        now,
        lease_until,
        limit,
        rules,
    };
    lease_due_within_rules(tx, None, terms, None, token).await
}

/// A statement with its arguments, to run in the same command as the
/// next (`before` of `lease_due_within_rules`) or on its own.
struct Bound<'q> {
    sql: String,
    args: SqliteArguments<'q>,
}

impl<'q> Bound<'q> {
    fn add<T>(&mut self, value: T) -> Result<()>
    where
        T: sqlx::Encode<'q, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite> + 'q,
    {
        self.args.add(value).map_err(sqlx::Error::Encode)?;
        Ok(())
    }

    async fn execute(self, tx: &mut WriteTx) -> Result<()> {
        let sql = tx.sql(&self.sql);
        sqlx::query_with(&sql, self.args).execute(&mut **tx).await?;
        Ok(())
    }

    /// Runs it as the transaction's last statement, and commits.
    async fn execute_and_commit(self, mut tx: WriteTx) -> Result<()> {
        let sql = tx.sql_then_commit(&self.sql);
        sqlx::query_with(&sql, self.args).execute(&mut *tx).await?;
        tx.committed();
        Ok(())
    }
}

/// The claim itself, in the caller's transaction (begun with its first
/// statement if not yet), which it commits: the rows leased within every
/// endpoint's slots, rate and circuit and every host's cap,
/// longest-waiting endpoint first. For an ingest `group` (how many
/// deliveries it made for each endpoint), only of the endpoints it made
/// deliveries for, and for each at most one more than it made: getting
/// fewer says no older work waits there, so the claim can say whether it
/// left anything due (`Claim::drained`).
async fn lease_due_within_rules(
    mut tx: WriteTx,
    before: Option<Bound<'_>>,
    terms: LeaseTerms,
    group: Option<&HashMap<&str, i64>>,
    token: &str,
) -> Result<Claim> {
    let LeaseTerms {
        now,
        lease_until,
        limit,
        rules,
    } = terms;
    let window = rules.rate_window(now);
    // `before` goes out in the same command, a round trip fewer.
    let mut open_slots = match before {
        // Its parameters come first; the slot count's are numbered after.
        Some(b) => Bound {
            sql: format!("{}; {}", b.sql, open_slots(b.args.len() + 1)),
            ..b
        },
        None => Bound {
            sql: OPEN_SLOTS.clone(),
            args: SqliteArguments::default(),
        },
    };
    open_slots.add(now.millis())?;
    open_slots.add(rules.default_rate)?;
    open_slots.add(window)?;
    if rules.host_cap > 0 {
        open_slots.sql.push_str("; ");
        open_slots.sql.push_str(HOSTS_IN_FLIGHT);
    }
    let sql = tx.sql(&open_slots.sql);
    let rows: Vec<SlotRow> = sqlx::query_as_with(&sql, open_slots.args)
        .fetch_all(&mut *tx)
        .await?;
    let mut open = Vec::with_capacity(rows.len());
    let mut hosts: HashMap<String, i64> = HashMap::new();
    for row in rows {
        match row {
            (Some(id), host, rate, free, slots) => open.push((id, host, rate, free, slots)),
            (None, Some(host), _, in_flight, _) => {
                hosts.insert(host, in_flight);
            }
            (None, None, ..) => {}
        }
    }
    let mut deliveries: Vec<Delivery> = Vec::new();
    // The rate-limited endpoints the claim asked: their starts are spent
    // with its commit.
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
        for (endpoint_id, host, rate, free, slots) in unasked {
            let made = match group.map(|g| g.get(endpoint_id.as_str())) {
                None => None,
                Some(Some(&made)) => Some(made),
                // Another endpoint's due work: the claim loops'.
                Some(None) => {
                    left_startable |= free > 0;
                    held_back |= slots <= 0;
                    continue;
                }
            };
            let host_asked = rules.host_cap > 0
                && host
                    .as_ref()
                    .is_some_and(|h| round.iter().any(|t| t.host.as_ref() == Some(h)));
            if left <= 0 || round.len() == LEASE_ENDPOINTS || host_asked {
                later.push((endpoint_id, host, rate, free, slots));
                continue;
            }
            let host_free = match (&host, rules.host_cap > 0) {
                (Some(h), true) => rules.host_cap - hosts.get(h).copied().unwrap_or(0),
                _ => i64::MAX,
            };
            let slots = slots.min(host_free);
            if slots <= 0 {
                held_back = true;
                continue;
            }
            let startable = free.min(host_free);
            let take = startable.min(left).min(made.map_or(i64::MAX, |m| m + 1));
            if take <= 0 {
                continue;
            }
            left -= take;
            round.push(Take {
                endpoint_id,
                host,
                rate,
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
        let mut lease = Bound {
            sql: lease_due(round.len()),
            args: SqliteArguments::default(),
        };
        lease.add(now.millis())?;
        lease.add(lease_until.millis())?;
        lease.add(token.to_owned())?;
        for t in &round {
            lease.add(t.endpoint_id.clone())?;
            lease.add(t.take)?;
        }
        // The last round's lease goes out with the spending and the commit,
        // a round trip fewer; its rows are decoded after the commit ran.
        let last = later.is_empty();
        if last {
            if !rated.is_empty() {
                let first = lease.args.len() + 2;
                lease.sql = format!("{}; {}", lease.sql, spend_rates(first, rated.len()));
                lease.add(window)?;
                for id in std::mem::take(&mut rated) {
                    lease.add(id)?;
                }
            }
            let sql = tx.sql_then_commit(&lease.sql);
            let writer = tx.writer().clone();
            let rows = sqlx::query_with(&sql, lease.args)
                .fetch_all(&mut *tx)
                .await?;
            tx.committed();
            let decoded: sqlx::Result<Vec<Delivery>> =
                rows.iter().map(Delivery::from_row).collect();
            let leased = match decoded {
                Ok(leased) => leased,
                Err(e) => {
                    hand_back_undecodable(&writer, token, now, &e.into()).await;
                    // What it held back still waits for a slot.
                    return Ok(Claim {
                        held_back,
                        ..Claim::default()
                    });
                }
            };
            count_round(&round, &leased, None, &mut held_back, &mut left_startable);
            deliveries.extend(leased);
            return Ok(Claim {
                deliveries,
                held_back,
                drained: !left_startable,
                ..Claim::default()
            });
        }
        // Not the last: a row that fails to decode rolls the lease back.
        let sql = tx.sql(&lease.sql);
        let leased: Vec<Delivery> = sqlx::query_as_with(&sql, lease.args)
            .fetch_all(&mut *tx)
            .await?;
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
    // The claim read the budgets once, at its start, and asks an endpoint
    // at most once, so no round depends on what an earlier one spent: the
    // spending waits for the commit's command, one statement for them
    // all, not a round trip for each.
    if rated.is_empty() {
        tx.commit().await?;
    } else {
        // Numbered as in the lease: `$3` the token, then the window.
        let mut spend = Bound {
            sql: spend_rates(5, rated.len()),
            args: SqliteArguments::default(),
        };
        spend.add(now.millis())?;
        spend.add(lease_until.millis())?;
        spend.add(token.to_owned())?;
        spend.add(window)?;
        for id in rated {
            spend.add(id)?;
        }
        spend.execute_and_commit(tx).await?;
    }
    Ok(Claim {
        deliveries,
        held_back,
        drained: !left_startable,
        ..Claim::default()
    })
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

/// A claim committed rows that will not decode (a fault in the data, not
/// in the claim): it hands every row it leased back as it was, and its
/// caller gets nothing to attempt. An ingest group's events are already
/// in; the rate budget the claim spent stays spent for the rest of its
/// second. If even the hand-back fails, the rescuer returns them when
/// the lease passes.
async fn hand_back_undecodable(writer: &Writer, token: &str, now: Timestamp, fault: &StoreError) {
    tracing::error!(error = %fault, "claimed rows that will not decode; handing them back");
    let back = async {
        let mut tx = writer.begin().await?;
        let sql = tx.sql_then_commit(&format!(
            "UPDATE deliveries SET state = 'pending', {UNCLAIMED}, updated_at = ? \
             WHERE state = 'in_flight' AND claim_token = ?"
        ));
        sqlx::query(&sql)
            .bind(now.millis())
            .bind(token)
            .execute(&mut *tx)
            .await?;
        tx.committed();
        Ok::<_, sqlx::Error>(())
    };
    if let Err(e) = back.await {
        tracing::error!(error = %e, "could not hand back undecodable claimed rows; the rescuer will when their lease passes");
    }
}

/// `Store::complete_attempts` in commands of up to `INSERT_CHUNK`
/// results, and one for the endpoints that delivered: each command is a
/// round trip to sqlx's SQLite thread, and under load every round trip
/// waits for the task that holds the one writer to be polled again. A
/// chunk names each delivery once (`distinct_runs`), so the held ids its
/// command answers say which of its results held their claims.
pub(super) async fn complete_attempts(
    writer: &Writer,
    batch: &[Completion],
) -> Result<Vec<Result<Delivery>>> {
    let mut written: Vec<&Completion> = Vec::with_capacity(batch.len());
    let mut answers = Vec::with_capacity(batch.len());
    // Begun with the first chunk's command; the write lock first, as the
    // command's first statement reads (`WriteTx::sql`).
    let mut tx = writer.begin().await?;
    let runs = distinct_runs(batch);
    for chunk in runs.iter().flat_map(|run| run.chunks(INSERT_CHUNK)) {
        let moved = record_chunk(&mut tx, chunk).await?;
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
        let sql = tx.sql_then_commit(&sql);
        let mut q = sqlx::query(&sql);
        for h in healthy {
            q = q
                .bind(h.endpoint_id)
                .bind(h.at.millis())
                .bind(h.delivered)
                .bind(h.first_started);
        }
        q.execute(&mut *tx).await?;
        tx.committed();
    } else {
        tx.commit().await?;
    }
    Ok(answers)
}

/// Writes the attempts of `chunk` whose claims are still held and moves
/// their deliveries to the state each result leaves, in one command:
/// which claims are held, asked once and answered in one row (each row a
/// statement answers is a wake-up of this task by sqlx's SQLite thread,
/// and under load most of that thread's switches), then the attempts and
/// the update, which ask the same of the same rows under the same lock.
/// Answers the ids it moved.
async fn record_chunk(tx: &mut WriteTx, chunk: &[Completion]) -> Result<HashSet<String>> {
    let sql = format!(
        "WITH r (id, token) AS (VALUES {0}) \
         SELECT group_concat(d.id, ' ') FROM r JOIN deliveries d ON d.id = r.id \
           AND d.state = 'in_flight' AND d.claim_token = r.token; \
         WITH r (delivery_id, token, attempt, started_at, duration_ms, request_headers, \
             response_status, response_headers, response_body, error, classification, \
             endpoint_id) AS (VALUES {1}) \
         INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, request_headers, \
           response_status, response_headers, response_body, error, classification, \
           endpoint_id) \
         SELECT r.delivery_id, r.attempt, r.started_at, r.duration_ms, r.request_headers, \
           r.response_status, r.response_headers, r.response_body, r.error, \
           r.classification, r.endpoint_id \
         FROM r JOIN deliveries d ON d.id = r.delivery_id AND d.state = 'in_flight' \
           AND d.claim_token = r.token; \
         WITH r (id, token, state, counted, seq, next_at, status, body, error, finished_at, at) \
           AS (VALUES {2}) \
         UPDATE deliveries SET state = r.state, attempts = deliveries.attempts + r.counted, \
           attempt_seq = r.seq, next_attempt_at = r.next_at, {UNCLAIMED}, \
           last_status = r.status, last_response = r.body, last_error = r.error, \
           finished_at = r.finished_at, updated_at = r.at \
         FROM r WHERE deliveries.id = r.id AND deliveries.state = 'in_flight' \
           AND deliveries.claim_token = r.token",
        rows(chunk.len(), "(?, ?)"),
        rows(chunk.len(), "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        rows(chunk.len(), "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
    );
    let sql = tx.sql(&sql);
    let mut q = sqlx::query_scalar::<_, Option<String>>(&sql);
    for c in chunk {
        q = q.bind(&c.claimed.id).bind(&c.claimed.claim_token);
    }
    for c in chunk {
        let (claimed, record) = (&c.claimed, &c.record);
        q = q
            .bind(&claimed.id)
            .bind(&claimed.claim_token)
            .bind(record.attempt)
            .bind(record.started_at)
            .bind(record.duration_ms)
            .bind(&record.request_headers)
            .bind(record.response_status)
            .bind(&record.response_headers)
            .bind(&record.response_body)
            .bind(&record.error)
            .bind(&record.classification)
            .bind(&claimed.endpoint_id);
    }
    for c in chunk {
        let (claimed, record) = (&c.claimed, &c.record);
        let Outcome {
            state,
            counted,
            next_at,
            finished_at,
        } = c.outcome();
        q = q
            .bind(&claimed.id)
            .bind(&claimed.claim_token)
            .bind(state.as_str())
            .bind(counted)
            .bind(record.attempt)
            .bind(next_at)
            .bind(record.response_status)
            .bind(&record.response_body)
            .bind(&record.error)
            .bind(finished_at)
            .bind(c.now.millis());
    }
    // All of it: a `fetch_one` would stop the command after its first row.
    let held = q.fetch_all(&mut **tx).await?.into_iter().flatten().next();
    Ok(held
        .iter()
        .flat_map(|ids| ids.split(' '))
        .map(str::to_owned)
        .collect())
}

/// Rows per multi-row INSERT: a statement each costs a round trip to
/// sqlx's SQLite thread, and a fixed chunk keeps the statement cache to a
/// few texts.
const INSERT_CHUNK: usize = 50;

/// `row` (a parenthesized list of `?`) `n` times, for a multi-row
/// statement. Plain `?`, not `$N`: sqlx looks up each parameter's name
/// before binding it, and SQLite finds a numbered one's name by walking
/// the statement's list of them, so binding 550 `$N` cost 150 000 steps
/// (perf: `sqlite3_bind_parameter_name` was a sixth of the writer
/// thread's time under the mixed load).
fn rows(n: usize, row: &str) -> String {
    vec![row; n].join(", ")
}

/// `n` plain parameters, `?, ?, …` (see `rows`).
pub(super) fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// `Store::insert_events` in multi-row statements of `INSERT_CHUNK` rows.
pub(super) async fn insert_events(
    writer: &Writer,
    batch: &[NewIngest],
    lease: Option<LeaseTerms>,
    token: &str,
) -> Result<(Vec<Result<InsertedEvent>>, Claim)> {
    let mut accounts = ingest::accounts(batch);
    // The list padded to a power of two with its last id: the first
    // command's text depends on it and on the first chunk's size, and
    // each text is one more in the writer's statement cache.
    let padded = accounts.len().next_power_of_two();
    if let Some(last) = accounts.last().cloned() {
        accounts.resize(padded, last);
    }
    // Read in the first command, ahead of its insert (the endpoints do not
    // depend on the events): a round trip fewer. Each row of that command
    // says which statement it came from.
    let endpoints = format!(
        "SELECT 'endpoint', id, account_id, event_types FROM endpoints \
         WHERE account_id IN ({}) AND state <> 'disabled' ORDER BY created_at, id",
        marks(accounts.len())
    );
    // Begun with the first chunk's command. An event that names its key
    // is written only if the key is active: the check is part of the
    // insert, under the write lock.
    let mut tx = writer.begin().await?;
    let mut kept = Vec::with_capacity(batch.len());
    let mut targets = Vec::new();
    for (i, chunk) in batch.chunks(INSERT_CHUNK).enumerate() {
        let insert = format!(
            "WITH n (account_id, id, event_type, payload, created_at, traceparent, key_id) \
               AS (VALUES {}) \
             INSERT INTO events (account_id, id, event_type, payload, created_at, traceparent) \
             SELECT account_id, id, event_type, payload, created_at, traceparent FROM n \
             WHERE key_id IS NULL \
               OR EXISTS (SELECT 1 FROM api_keys k WHERE k.id = n.key_id \
                 AND k.revoked_at IS NULL) \
               OR EXISTS (SELECT 1 FROM platform_keys k WHERE k.id = n.key_id \
                 AND k.revoked_at IS NULL) \
             ON CONFLICT DO NOTHING RETURNING 'event', account_id, id, NULL",
            rows(chunk.len(), "(?, ?, ?, ?, ?, ?, ?)")
        );
        let sql = if i == 0 {
            tx.sql(&format!("{endpoints}; {insert}"))
        } else {
            tx.sql(&insert)
        };
        let mut q = sqlx::query_as::<_, (String, String, String, Option<String>)>(&sql);
        if i == 0 {
            for id in &accounts {
                q = q.bind(id);
            }
        }
        for n in chunk {
            q = q
                .bind(&n.event.account_id)
                .bind(&n.event.id)
                .bind(&n.event.event_type)
                .bind(&n.event.payload)
                .bind(n.now.millis())
                .bind(&n.traceparent)
                .bind(&n.key_id);
        }
        for (from, a, b, types) in q.fetch_all(&mut *tx).await? {
            match (from.as_str(), types) {
                ("endpoint", Some(types)) => targets.push(ingest::Target::new(a, b, &types)),
                _ => kept.push((a, b)),
            }
        }
    }
    let keys = ingest::keys(batch);
    // Every event stored: each named an active key, so only a batch that
    // lost some asks which keys are revoked.
    let mut active = HashSet::new();
    if kept.len() == batch.len() {
        active.extend(keys);
    } else {
        for chunk in keys.chunks(INSERT_CHUNK) {
            let sql = format!(
                "SELECT id FROM api_keys WHERE revoked_at IS NULL AND id IN ({0}) \
                 UNION ALL \
                 SELECT id FROM platform_keys WHERE revoked_at IS NULL AND id IN ({0})",
                placeholders(1, chunk.len())
            );
            let mut q = sqlx::query_scalar::<_, String>(&sql);
            for id in chunk {
                q = q.bind(id);
            }
            active.extend(q.fetch_all(&mut *tx).await?);
        }
    }
    let targets: Vec<&ingest::Target> = targets.iter().collect();
    let results = ingest::fan_out(batch, &kept, &active, &targets);
    let new = ingest::new_deliveries(&results);
    let mut made: HashMap<&str, i64> = HashMap::new();
    for d in &new {
        *made.entry(d.endpoint_id.as_str()).or_default() += 1;
    }
    let mut inserts = new
        .chunks(INSERT_CHUNK)
        .map(insert_deliveries)
        .collect::<Result<Vec<_>>>()?;
    // The last insert goes out with what follows it: the lease's first
    // statement, or the commit.
    let last = inserts.pop();
    for insert in inserts {
        insert.execute(&mut tx).await?;
    }
    let claim = match (last, lease) {
        (Some(last), Some(mut terms)) => {
            // Due as of the latest of the group's own times: a wall clock
            // stepped back since would hide them from the lease, which
            // would then say it left nothing due.
            let newest = batch.iter().map(|n| n.now).max();
            terms.now = newest.map_or(terms.now, |n| n.max(terms.now));
            lease_due_within_rules(tx, Some(last), terms, Some(&made), token).await?
        }
        (Some(last), None) => {
            last.execute_and_commit(tx).await?;
            Claim::default()
        }
        (None, _) => {
            tx.commit().await?;
            Claim::default()
        }
    };
    Ok((results, claim))
}

/// The insert of a chunk of new deliveries, pending and due at once.
fn insert_deliveries<'q>(chunk: &[&'q Delivery]) -> Result<Bound<'q>> {
    let mut insert = Bound {
        sql: format!(
            "INSERT INTO deliveries (id, account_id, event_id, endpoint_id, state, \
               next_attempt_at, give_up_at, created_at, updated_at) VALUES {}",
            rows(chunk.len(), "(?, ?, ?, ?, 'pending', ?, ?, ?, ?)")
        ),
        args: SqliteArguments::default(),
    };
    for &d in chunk {
        insert.add(&d.id)?;
        insert.add(&d.account_id)?;
        insert.add(&d.event_id)?;
        insert.add(&d.endpoint_id)?;
        insert.add(d.created_at)?;
        insert.add(d.give_up_at)?;
        insert.add(d.created_at)?;
        insert.add(d.created_at)?;
    }
    Ok(insert)
}
