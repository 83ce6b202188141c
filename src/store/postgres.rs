//! The scale-out backend: many nodes share one Postgres and one queue.

use std::time::Duration;

use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    PgPool,
};

use super::{parse_options, redact_url, Delivery, Pool, Result, Store, StoreError};
use crate::clock::Timestamp;

/// Connects, optionally inside `schema` (created if missing): tests get a
/// fresh schema each, so they need no CREATE DATABASE privilege.
pub async fn connect(url: &str, schema: Option<&str>) -> Result<Store> {
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
        .max_connections(16)
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
        pg_schema: schema.map(str::to_owned),
    })
}

/// `SKIP LOCKED` lets concurrent claimers, on any node, pass over each
/// other's rows instead of waiting or double-claiming.
pub(super) async fn claim_due(
    pool: &PgPool,
    now: Timestamp,
    lease_until: Timestamp,
    limit: i64,
) -> Result<Vec<Delivery>> {
    let sql = "WITH due AS ( \
                 SELECT d.id FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id \
                 WHERE d.state = 'pending' AND d.next_attempt_at <= $1 AND e.state = 'active' \
                   AND (e.circuit_state <> 'open' OR e.circuit_open_until <= $1) \
                 ORDER BY d.next_attempt_at, d.id LIMIT $3 \
                 FOR UPDATE OF d SKIP LOCKED) \
               UPDATE deliveries SET state = 'in_flight', claimed_at = $1, lease_until = $2, \
                 claim_token = $4, updated_at = $1 \
               FROM due WHERE deliveries.id = due.id \
               RETURNING deliveries.*";
    Ok(sqlx::query_as::<_, Delivery>(sql)
        .bind(now.millis())
        .bind(lease_until.millis())
        .bind(limit)
        .bind(crate::ids::random_token(16))
        .fetch_all(pool)
        .await?)
}
