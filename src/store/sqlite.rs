//! The embedded backend: one SQLite file in WAL mode, one writer at a time.

use std::{path::Path, sync::LazyLock, time::Duration};

use sqlx::{
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
    SqlitePool,
};

use super::{
    completion::{healthy_endpoints, Completion, Outcome},
    parse_options,
    sql::{placeholders, ANY_OPEN_SLOT, ENDPOINT_SUCCEEDED, OPEN_SLOTS, UNCLAIMED},
    Delivery, Pool, Result, Store, StoreError,
};
use crate::clock::Timestamp;

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
        // hanging while another process holds the file locked.
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(true);
    let connect_error = |e: sqlx::Error| StoreError::Connect {
        url: display_path(&path),
        cause: e.to_string(),
    };
    let pool = SqlitePoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options.clone())
        .await
        .map_err(connect_error)?;
    let writer = SqlitePoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options)
        .await
        .map_err(connect_error)?;
    Ok(Store {
        pool: Pool::Sqlite(pool),
        writer: Some(writer),
        pg_schema: None,
        secrets: None,
    })
}

fn display_path(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// Picks per endpoint: each endpoint with free slots gives at most that
/// many of its oldest due rows (a walk of its due index), the oldest of
/// those win, and the same transaction leases them. `BEGIN IMMEDIATE`
/// takes SQLite's one write lock first, so no other claim (from any
/// process on the file) sees the same slots or rows. A claim costs the
/// same with 100 or 1 M deliveries queued.
pub(super) async fn claim_due(
    reader: &SqlitePool,
    writer: &SqlitePool,
    now: Timestamp,
    lease_until: Timestamp,
    limit: i64,
) -> Result<Vec<Delivery>> {
    // Most polls and wakes find nothing due: learn that from a plain read
    // before taking the one writer. (On Postgres the same probe measured
    // slower than just claiming.)
    let found = sqlx::query(&ANY_OPEN_SLOT)
        .bind(now.millis())
        .fetch_optional(reader)
        .await?;
    if found.is_none() {
        return Ok(Vec::new());
    }
    let due = "SELECT id, next_attempt_at FROM deliveries \
               WHERE endpoint_id = $1 AND state = 'pending' AND next_attempt_at <= $2 \
               ORDER BY next_attempt_at, id LIMIT $3";
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let open: Vec<(String, i64)> = sqlx::query_as(&OPEN_SLOTS)
        .bind(now.millis())
        .fetch_all(&mut *tx)
        .await?;
    let mut picked: Vec<(i64, String)> = Vec::new();
    for (endpoint_id, free) in open {
        let rows: Vec<(String, i64)> = sqlx::query_as(due)
            .bind(&endpoint_id)
            .bind(now.millis())
            .bind(free.min(limit))
            .fetch_all(&mut *tx)
            .await?;
        picked.extend(rows.into_iter().map(|(id, at)| (at, id)));
    }
    picked.sort_unstable();
    picked.truncate(usize::try_from(limit).unwrap_or(0));
    if picked.is_empty() {
        tx.rollback().await?;
        return Ok(Vec::new());
    }
    let ids = placeholders(4, picked.len());
    let lease = format!(
        "UPDATE deliveries SET state = 'in_flight', claimed_at = $1, lease_until = $2, \
           claim_token = $3, updated_at = $1 \
         WHERE state = 'pending' AND id IN ({ids}) RETURNING *"
    );
    let mut q = sqlx::query_as::<_, Delivery>(&lease)
        .bind(now.millis())
        .bind(lease_until.millis())
        .bind(crate::ids::random_token(16));
    for (_, id) in &picked {
        q = q.bind(id);
    }
    let claimed = q.fetch_all(&mut *tx).await?;
    tx.commit().await?;
    Ok(claimed)
}

/// `Store::complete_attempts` a statement per row: on the one writer
/// connection a round trip costs microseconds, so SQLite needs no arrays
/// (and has no `unnest`).
pub(super) async fn complete_attempts(
    writer: &SqlitePool,
    batch: &[Completion],
) -> Result<Vec<Result<Delivery>>> {
    let insert_attempt = "INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, \
                              request_headers, response_status, response_headers, response_body, \
                              error, classification, endpoint_id) \
                              VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";
    static UPDATE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE deliveries SET state = $1, attempts = attempts + $2, attempt_seq = $3, \
               next_attempt_at = $4, {UNCLAIMED}, last_status = $5, last_response = $6, \
               last_error = $7, finished_at = $8, updated_at = $9 \
             WHERE id = $10 AND state = 'in_flight' AND claim_token = $11 RETURNING *"
        )
    });
    let mut written: Vec<&Completion> = Vec::with_capacity(batch.len());
    let mut tx = writer.begin().await?;
    let mut answers = Vec::with_capacity(batch.len());
    for c in batch {
        let (claimed, record) = (&c.claimed, &c.record);
        let Outcome {
            state,
            counted,
            next_at,
            finished_at,
        } = c.outcome();
        let updated = sqlx::query_as::<_, Delivery>(&UPDATE)
            .bind(state.as_str())
            .bind(counted)
            .bind(record.attempt)
            .bind(next_at)
            .bind(record.response_status)
            .bind(&record.response_body)
            .bind(&record.error)
            .bind(finished_at)
            .bind(c.now.millis())
            .bind(&claimed.id)
            .bind(&claimed.claim_token)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(updated) = updated else {
            answers.push(Err(StoreError::LostClaim(claimed.id.clone())));
            continue;
        };
        sqlx::query(insert_attempt)
            .bind(&claimed.id)
            .bind(record.attempt)
            .bind(record.started_at)
            .bind(record.duration_ms)
            .bind(&record.request_headers)
            .bind(record.response_status)
            .bind(&record.response_headers)
            .bind(&record.response_body)
            .bind(&record.error)
            .bind(&record.classification)
            .bind(&claimed.endpoint_id)
            .execute(&mut *tx)
            .await?;
        written.push(c);
        answers.push(Ok(updated));
    }
    for (endpoint_id, at) in healthy_endpoints(&written) {
        sqlx::query(ENDPOINT_SUCCEEDED)
            .bind(at.millis())
            .bind(endpoint_id)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(answers)
}
