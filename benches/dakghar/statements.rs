//! Where Postgres's time went over a stretch of the bench, statement by
//! statement, from `pg_stat_statements`: CPU a delivery says how much
//! Postgres spent, this says on what (the ingest's write, the results'
//! function, a vacuum), which a profile of the server's processes
//! cannot name. Only when the bench's Postgres preloads the module
//! (`shared_preload_libraries`) and its database has the extension; with
//! `pg_stat_statements.track = all` the statements inside our plpgsql
//! functions are counted too, as well as the calls that ran them. Like
//! the WAL figures, the counts are the whole database's.

use std::collections::HashMap;

use sqlx::{Connection, PgConnection, Row};

/// How many statements a row names, the costliest first.
const SHOWN: usize = 6;

/// The counters at one moment, by statement (and whether it was called
/// by the client or from inside a function).
pub struct Mark(HashMap<(i64, bool), Counters>);

#[derive(Clone, Default)]
struct Counters {
    calls: i64,
    exec_ms: f64,
    plan_ms: f64,
    text: String,
}

/// `None` without a Postgres URL or without the extension: the row is
/// left out, never guessed.
pub async fn mark(url: Option<&str>) -> Option<Mark> {
    let mut conn = PgConnection::connect(url?).await.ok()?;
    let schema: String = sqlx::query_scalar(
        "SELECT quote_ident(n.nspname) FROM pg_extension x \
         JOIN pg_namespace n ON n.oid = x.extnamespace WHERE x.extname = 'pg_stat_statements'",
    )
    .fetch_optional(&mut conn)
    .await
    .ok()??;
    let sql = format!(
        "SELECT queryid, toplevel, calls, total_exec_time, total_plan_time, \
           left(regexp_replace(query, '\\s+', ' ', 'g'), 48) AS text \
         FROM {schema}.pg_stat_statements \
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
           AND queryid IS NOT NULL"
    );
    let rows = sqlx::query(&sql).fetch_all(&mut conn).await.ok()?;
    let _ = conn.close().await;
    let mut counters = HashMap::with_capacity(rows.len());
    for row in rows {
        let key = (row.try_get("queryid").ok()?, row.try_get("toplevel").ok()?);
        counters.insert(
            key,
            Counters {
                calls: row.try_get("calls").ok()?,
                exec_ms: row.try_get("total_exec_time").ok()?,
                plan_ms: row.try_get("total_plan_time").ok()?,
                text: row.try_get("text").ok()?,
            },
        );
    }
    Some(Mark(counters))
}

/// "all statements 212 µs a delivery (planning 4) · `WITH active AS (…`
/// 1 148 calls, 1.288 ms each, 129 µs a delivery · …", the costliest
/// first; a statement run from inside a function says "inside".
pub fn between(before: Option<&Mark>, after: Option<&Mark>, deliveries: usize) -> Option<String> {
    let (before, after) = (before?, after?);
    let mut spent: Vec<(bool, Counters)> = after
        .0
        .iter()
        .filter_map(|(key, a)| {
            let b = before.0.get(key).cloned().unwrap_or_default();
            let d = Counters {
                calls: a.calls - b.calls,
                exec_ms: a.exec_ms - b.exec_ms,
                plan_ms: a.plan_ms - b.plan_ms,
                text: a.text.clone(),
            };
            (d.exec_ms + d.plan_ms > 0.0).then_some((key.1, d))
        })
        .collect();
    spent.sort_by(|x, y| (y.1.exec_ms + y.1.plan_ms).total_cmp(&(x.1.exec_ms + x.1.plan_ms)));
    let per = |ms: f64| ms * 1000.0 / deliveries.max(1) as f64;
    // A function's own statements are inside its call's time: only the
    // client's count toward the whole.
    let (exec, plan) = spent
        .iter()
        .filter(|(top, _)| *top)
        .fold((0.0, 0.0), |(e, p), (_, c)| (e + c.exec_ms, p + c.plan_ms));
    let mut parts = vec![format!(
        "all the client's statements {:.0} µs a delivery (planning {:.0})",
        per(exec + plan),
        per(plan)
    )];
    for (top, c) in spent.iter().take(SHOWN) {
        parts.push(format!(
            "`{}…`{} {} calls, {:.3} ms each, {:.0} µs a delivery",
            c.text.replace(['|', '`'], "'"),
            if *top { "" } else { " (inside a function)" },
            c.calls,
            (c.exec_ms + c.plan_ms) / c.calls.max(1) as f64,
            per(c.exec_ms + c.plan_ms)
        ));
    }
    Some(parts.join(" · "))
}
