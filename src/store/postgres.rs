//! The scale-out backend: many nodes share one Postgres and one queue.

use std::time::Duration;

use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    PgPool,
};

use super::{parse_options, redact_url, Delivery, Pool, Result, Store, StoreError, CLAIM_SLOTS};
use crate::clock::Timestamp;

/// Connects, optionally inside `schema` (created if missing): tests get a
/// fresh schema each, so they need no CREATE DATABASE privilege.
pub async fn connect(url: &str, schema: Option<&str>) -> Result<Store> {
    connect_pooled(url, schema, super::DEFAULT_POOL).await
}

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
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .map_err(connect_error)?;
    if let Some(schema) = schema {
        sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .execute(&pool)
            .await
            .map_err(connect_error)?;
    }
    Ok(Store {
        pool: Pool::Postgres(pool),
        writer: None,
        pg_schema: schema.map(str::to_owned),
    })
}

/// Claims run one at a time across all nodes (a transaction-scoped advisory
/// lock), so the free slots each claim sees (`CLAIM_SLOTS`) are exact.
/// Each endpoint with free slots gives at most that many of its oldest due
/// rows (an index walk per endpoint), so a claim costs the same with 100
/// or 1 M deliveries queued. SQLite follows the same rules in Rust.
pub(super) async fn claim_due(
    pool: &PgPool,
    now: Timestamp,
    lease_until: Timestamp,
    limit: i64,
) -> Result<Vec<Delivery>> {
    let sql = format!(
        "WITH slots AS ({CLAIM_SLOTS}), \
           picked AS ( \
             SELECT c.id, c.next_attempt_at FROM slots s \
             CROSS JOIN LATERAL ( \
               SELECT d.id, d.next_attempt_at FROM deliveries d \
               WHERE d.endpoint_id = s.id AND d.state = 'pending' AND d.next_attempt_at <= $1 \
               ORDER BY d.next_attempt_at, d.id LIMIT GREATEST(s.free, 0)) c \
             WHERE s.free > 0 \
             ORDER BY c.next_attempt_at, c.id LIMIT $3) \
         UPDATE deliveries SET state = 'in_flight', claimed_at = $1, lease_until = $2, \
           claim_token = $4, updated_at = $1 \
         FROM picked WHERE deliveries.id = picked.id AND deliveries.state = 'pending' \
         RETURNING deliveries.*"
    );
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))")
        .bind(CLAIM_LOCK)
        .execute(&mut *tx)
        .await?;
    let claimed = sqlx::query_as::<_, Delivery>(&sql)
        .bind(now.millis())
        .bind(lease_until.millis())
        .bind(limit)
        .bind(crate::ids::random_token(16))
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(claimed)
}

/// The advisory-lock class for claiming ("dk" in ASCII).
const CLAIM_LOCK: i32 = 0x646b;

/// The channel that tells every node's workers new work is due. Named per
/// schema so separate installations (and tests) on one server stay apart.
pub(super) fn work_channel(schema: Option<&str>) -> String {
    format!("dakghar_work_{}", schema.unwrap_or("public"))
}

pub(super) async fn announce_work(pool: &PgPool, schema: Option<&str>) -> Result<()> {
    sqlx::query("SELECT pg_notify($1, '')")
        .bind(work_channel(schema))
        .execute(pool)
        .await?;
    Ok(())
}
