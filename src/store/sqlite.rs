//! The embedded backend: one SQLite file in WAL mode, one writer at a time.

use std::{path::Path, time::Duration};

use sqlx::{
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
    SqlitePool,
};

use super::{parse_options, Delivery, Pool, Result, Store, StoreError, CLAIMABLE};
use crate::clock::Timestamp;

pub async fn connect(url: &str) -> Result<Store> {
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
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true);
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .map_err(|e| StoreError::Connect {
            url: display_path(&path),
            cause: e.to_string(),
        })?;
    Ok(Store {
        pool: Pool::Sqlite(pool),
        pg_schema: None,
    })
}

fn display_path(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// One statement both picks and leases the rows, so two workers can never
/// take the same delivery: SQLite runs writes one at a time, which also
/// keeps the per-endpoint in-flight count exact.
pub(super) async fn claim_due(
    pool: &SqlitePool,
    now: Timestamp,
    lease_until: Timestamp,
    limit: i64,
) -> Result<Vec<Delivery>> {
    let sql = format!(
        "UPDATE deliveries SET state = 'in_flight', claimed_at = $1, lease_until = $2, \
           claim_token = $4, updated_at = $1 \
         WHERE id IN ({CLAIMABLE}) RETURNING *"
    );
    Ok(sqlx::query_as::<_, Delivery>(&sql)
        .bind(now.millis())
        .bind(lease_until.millis())
        .bind(limit)
        .bind(crate::ids::random_token(16))
        .fetch_all(pool)
        .await?)
}
