//! Which tables Postgres vacuumed or analyzed over a stretch of the bench,
//! and when each finished (`pg_stat_user_tables`): a latency tail that
//! lines up with one has a suspect.

use std::collections::BTreeMap;

use sqlx::{Connection, PgConnection};

/// The counts of one moment, with the server's clock then.
pub struct Mark {
    at: f64,
    tables: BTreeMap<String, Counts>,
}

#[derive(Clone, Copy)]
struct Counts {
    /// vacuum (the node's), autovacuum, analyze, autoanalyze.
    runs: [i64; 4],
    /// When the latest of each ended, seconds since the epoch.
    ended: [Option<f64>; 4],
}

const KINDS: [&str; 4] = ["vacuum", "autovacuum", "analyze", "autoanalyze"];

/// `None` without a Postgres URL or when the server cannot be read.
pub async fn mark(url: Option<&str>) -> Option<Mark> {
    let mut conn = PgConnection::connect(url?).await.ok()?;
    let at: f64 = sqlx::query_scalar("SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8")
        .fetch_one(&mut conn)
        .await
        .ok()?;
    type Row = (
        String,
        i64,
        i64,
        i64,
        i64,
        Option<f64>,
        Option<f64>,
        Option<f64>,
        Option<f64>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT relname::text, vacuum_count, autovacuum_count, analyze_count, autoanalyze_count, \
                EXTRACT(EPOCH FROM last_vacuum)::float8, EXTRACT(EPOCH FROM last_autovacuum)::float8, \
                EXTRACT(EPOCH FROM last_analyze)::float8, EXTRACT(EPOCH FROM last_autoanalyze)::float8 \
         FROM pg_stat_user_tables",
    )
    .fetch_all(&mut conn)
    .await
    .ok()?;
    let _ = conn.close().await;
    let tables = rows
        .into_iter()
        .map(|(name, v, av, a, aa, lv, lav, la, laa)| {
            let counts = Counts {
                runs: [v, av, a, aa],
                ended: [lv, lav, la, laa],
            };
            (name, counts)
        })
        .collect();
    Some(Mark { at, tables })
}

/// "autovacuum finished_deliveries (ended at 3.2 s) · vacuum
/// in_flight_deliveries ×4 (the last at 9.1 s)", times from `before`;
/// "none" when nothing ran, `None` when either mark is missing.
pub fn between(before: Option<&Mark>, after: Option<&Mark>) -> Option<String> {
    let (b, a) = (before?, after?);
    let mut ran = Vec::new();
    for (name, now) in &a.tables {
        let then = b.tables.get(name);
        for (k, kind) in KINDS.iter().enumerate() {
            let n = now.runs[k] - then.map_or(0, |t| t.runs[k]);
            if n <= 0 {
                continue;
            }
            let ended = now.ended[k].map(|e| e - b.at);
            ran.push(match (n, ended) {
                (1, Some(t)) => format!("{kind} {name} (ended at {t:.1} s)"),
                (n, Some(t)) => format!("{kind} {name} ×{n} (the last ended at {t:.1} s)"),
                (n, None) => format!("{kind} {name} ×{n}"),
            });
        }
    }
    Some(if ran.is_empty() {
        "none".into()
    } else {
        ran.join(" · ")
    })
}
