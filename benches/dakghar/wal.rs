//! Postgres's write-ahead log over a stretch of the bench, from
//! `pg_stat_wal` (Postgres 14+) and the checkpointer's counts. Both count
//! the whole server, so nothing but the bench should write to it
//! meanwhile.

use sqlx::{Connection, PgConnection};

/// The server's counters at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    records: i64,
    full_pages: i64,
    bytes: i64,
    /// Checkpoints started because the WAL reached `max_wal_size`.
    wal_checkpoints: Option<i64>,
}

/// What a delivery (or the peer's job) wrote, between two marks.
#[derive(Debug, Clone, Copy)]
pub struct PerDelivery {
    pub bytes: f64,
    pub records: f64,
    pub full_pages: f64,
    /// Over the whole stretch, not a delivery.
    pub wal_checkpoints: Option<i64>,
}

/// `None` without a Postgres URL, before Postgres 14, or when the server
/// cannot be read: the figure is left out, never guessed.
pub async fn mark(url: Option<&str>) -> Option<Mark> {
    let mut conn = PgConnection::connect(url?).await.ok()?;
    let (records, full_pages, bytes): (i64, i64, i64) =
        sqlx::query_as("SELECT wal_records, wal_fpi, wal_bytes::bigint FROM pg_stat_wal")
            .fetch_one(&mut conn)
            .await
            .ok()?;
    // Postgres 17 moved the count to a view of its own.
    let mut wal_checkpoints = None;
    for sql in [
        "SELECT checkpoints_req FROM pg_stat_bgwriter",
        "SELECT num_requested FROM pg_stat_checkpointer",
    ] {
        wal_checkpoints = sqlx::query_scalar(sql).fetch_one(&mut conn).await.ok();
        if wal_checkpoints.is_some() {
            break;
        }
    }
    let _ = conn.close().await;
    Some(Mark {
        records,
        full_pages,
        bytes,
        wal_checkpoints,
    })
}

pub fn per_delivery(before: Option<Mark>, after: Option<Mark>, n: usize) -> Option<PerDelivery> {
    let (b, a) = (before?, after?);
    let each = |x: i64, y: i64| (y - x) as f64 / n.max(1) as f64;
    Some(PerDelivery {
        bytes: each(b.bytes, a.bytes),
        records: each(b.records, a.records),
        full_pages: each(b.full_pages, a.full_pages),
        wal_checkpoints: b.wal_checkpoints.zip(a.wal_checkpoints).map(|(x, y)| y - x),
    })
}

/// "2 480 bytes · 31.2 records · 0.21 full-page images", or a dash.
pub fn describe(w: Option<&PerDelivery>) -> String {
    let Some(w) = w else {
        return "–".into();
    };
    format!(
        "{:.0} bytes · {:.1} records · {:.2} full-page images",
        w.bytes, w.records, w.full_pages
    )
}
