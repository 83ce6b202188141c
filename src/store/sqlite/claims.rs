//! SQLite's claims: the endpoints' open slots, counted under the one
//! write lock, and the rows leased within every endpoint's slots, rate
//! and circuit and every host's cap, in the transaction that finds them.
//! An ingest group's lease (`super::insert_group`) runs the same rounds.

use std::{
    collections::{HashMap, VecDeque},
    sync::LazyLock,
};

use rusqlite::Connection;
use sqlx::SqlitePool;

use super::{
    execute, numbered, query,
    rows::{delivery, DELIVERY_COLUMNS},
    Args, Writer,
};
use crate::{
    clock::Timestamp,
    store::{
        claim_rules::ClaimRules,
        ingest::{in_flight, LeaseTerms},
        sql::HAND_BACK_CLAIM,
        Claim, Delivery, Result, StoreError,
    },
};

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
pub(super) fn open_slots_and(n: usize) -> String {
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
         WHERE id IN ({}) RETURNING {DELIVERY_COLUMNS}",
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
pub(in crate::store) async fn claim_due(
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

/// `open_slots(1)` for the direct connection, built once: every claim
/// that finds an open slot runs it.
static OPEN_SLOTS_DIRECT: LazyLock<String> = LazyLock::new(|| numbered(&open_slots(1)));

/// An endpoint as `open_slots` reads it.
pub(super) struct Open {
    pub(super) endpoint_id: String,
    host: Option<String>,
    rate: i64,
    free: i64,
    slots: i64,
    /// Its oldest pending delivery's time; `None` when none is pending.
    pub(super) at: Option<i64>,
}

/// Runs an `open_slots` statement with `claim_slots(1)`'s parameters and
/// then `ids`.
pub(super) fn read_open(
    tx: &Connection,
    sql: &str,
    terms: LeaseTerms,
    ids: &[&str],
) -> Result<Vec<Open>> {
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
pub(super) enum Source<'a> {
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
pub(super) struct Rounds {
    pub(super) claim: Claim,
    pub(super) rated: Vec<String>,
}

/// Leases from the `open` endpoints, in their order (the longest-waiting
/// first), within every endpoint's slots, rate and circuit and every
/// host's cap.
/// For an ingest `group` (how many deliveries it made for each
/// endpoint), only of the endpoints it made deliveries for, and for each
/// at most one more than it made: getting fewer says no older work waits
/// there, so the claim can say whether it left anything due
/// (`Claim::drained`).
pub(super) fn lease_rounds(
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
pub(super) fn spend_starts(
    tx: &Connection,
    token: &str,
    terms: LeaseTerms,
    rated: &[String],
) -> Result<()> {
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
    execute(tx, &numbered(&HAND_BACK_CLAIM), &args)?;
    Ok(())
}
