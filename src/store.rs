//! Storage: one schema on two backends. SQLite is the embedded default,
//! Postgres is how several nodes share one queue.
//!
//! Almost every query is written once in SQL both backends accept (`$n`
//! placeholders, `ON CONFLICT`, `RETURNING`), in the file of its table
//! group, and runs on whichever pool is configured through `on_pool!` or
//! `on_writer!`. The rule that keeps it so: **`match Pool` appears only in
//! `store.rs` and `queue.rs`; SQL that only one backend runs lives in
//! `sqlite.rs` or `postgres.rs`**, with a comment saying why it differs.

use std::str::FromStr;

use sqlx::{PgPool, SqlitePool};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone)]
pub enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

#[derive(Debug, Clone)]
pub struct Store {
    pool: Pool,
    /// SQLite only: the one connection the delivery path writes through.
    writer: Option<SqliteWriter>,
    /// Postgres only: the delivery path's connections, the most recently
    /// used first (`postgres::Warm`).
    pg_warm: Option<std::sync::Arc<postgres::Warm>>,
    /// The Postgres schema this store lives in (tests get one each).
    pg_schema: Option<String>,
    /// Seals endpoint secrets; without it no endpoint can be written or read.
    secrets: Option<std::sync::Arc<crate::sealing::SecretsKey>>,
    /// The node this process is, for its claim tokens (`nodes.rs`).
    node: Option<std::sync::Arc<str>>,
    /// Postgres only: the accounts' fan-outs ingest plans from.
    fan_outs: std::sync::Arc<fan_outs::FanOuts>,
}

/// SQLite's one connection for the delivery path's writes, and the turn
/// claims take before they queue for it (`Store::claim`).
#[derive(Debug, Clone)]
struct SqliteWriter {
    conn: sqlite::Writer,
    claim_turn: std::sync::Arc<tokio::sync::Mutex<()>>,
}

/// Runs the same body against whichever pool is configured. The body is
/// type-checked once per backend, so SQL that one of them rejects at runtime
/// is still caught by the shared test suite running on both.
macro_rules! on_pool {
    ($store:expr, |$pool:ident| $body:expr) => {
        match &$store.pool {
            Pool::Sqlite($pool) => $body,
            Pool::Postgres($pool) => $body,
        }
    };
}

/// Like `on_pool!`, for the writes on the delivery path. On SQLite they
/// queue for one connection kept for them, in order, instead of meeting at
/// the file's write lock, where SQLite's busy handler sleeps for
/// milliseconds at a time and latency goes with it.
macro_rules! on_writer {
    ($store:expr, |$pool:ident| $body:expr) => {
        match (&$store.pool, &$store.writer) {
            (Pool::Sqlite(_), Some(writer)) => {
                let mut held = writer.conn.lock().await?;
                let $pool = &mut *held;
                $body
            }
            (Pool::Sqlite($pool), None) => $body,
            (Pool::Postgres($pool), _) => $body,
        }
    };
}

/// Rows a deletion of a whole endpoint or account removes per statement:
/// small enough that on SQLite other writers wait milliseconds for the
/// lock between batches, not the whole deletion.
const DELETE_BATCH: i64 = 200;

// The table groups use the macros above, so they come after them.
mod accounts;
mod admin;
mod alerts;
mod bounded;
mod claim_rules;
mod completion;
mod endpoints;
mod error;
mod events;
mod fan_outs;
mod group_commit;
mod health;
mod ingest;
mod key_cache;
mod key_uses;
mod keys;
mod links;
mod login_failures;
mod models;
mod nodes;
mod notifications;
pub mod postgres;
mod queue;
mod rate;
mod replay;
mod retention;
mod sealed_secrets;
mod sessions;
mod sql;
pub mod sqlite;
mod users;

pub use accounts::Deleted;
pub use admin::{AccountOverview, GlobalRates, QueueGauges};
pub use alerts::{ExpiredSince, ExpiringSoon, FailingDetails};
pub use claim_rules::ClaimRules;
pub use completion::{AttemptRecord, Completion, Transition};
pub use endpoints::{EndpointFailure, EndpointPatch, NewEndpoint};
pub use error::{Result, StoreError};
pub use events::{AnswerFilter, EventFilter, EventPage, InsertedEvent, NewEvent};
pub use group_commit::{GroupCommit, Linger};
pub use health::{Health, LastAttempt, Latency, WindowStats};
pub use ingest::{Ingester, LeaseOffer, LeaseTerms, NewIngest, Workers};
pub use key_cache::KeyCache;
pub use key_uses::KeyUses;
pub use keys::KeyHolder;
pub use links::NewLink;
pub use models::*;
pub use nodes::Node;
pub use postgres::VacuumPolicy;
pub use queue::BatchInputs;
pub use replay::{ReplayCriteria, ReplayGroup, ReplayProgress, ReplayRun};
pub use retention::OldHistory;
pub use sessions::Sessions;
pub use users::TeamChange;

/// Connections per process unless `--database-pool` says otherwise.
pub const DEFAULT_POOL: u32 = 16;

/// Where the SQLite database lives when no URL is configured.
pub const DEFAULT_SQLITE_PATH: &str = "data/dakghar.db";

/// The database a configured URL names: blank or none is the embedded
/// SQLite file.
pub fn database_url(configured: Option<&str>) -> String {
    configured
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| format!("sqlite://{DEFAULT_SQLITE_PATH}"))
}

/// Hides the password of a database URL before it is shown to anyone.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("****"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

impl Store {
    /// Opens the database named by `url`; `None` means the embedded SQLite file.
    pub async fn connect(url: Option<&str>) -> Result<Store> {
        Store::connect_pooled(url, DEFAULT_POOL).await
    }

    /// Like `connect`, with at most `max_connections` open (on SQLite: the
    /// readers; the delivery path's writer is one more).
    pub async fn connect_pooled(url: Option<&str>, max_connections: u32) -> Result<Store> {
        let url = database_url(url);
        let scheme = url.split(':').next().unwrap_or_default();
        match scheme {
            "sqlite" => sqlite::connect(&url, max_connections).await,
            "postgres" | "postgresql" => {
                postgres::connect_pooled(&url, None, max_connections).await
            }
            other => Err(StoreError::Config(format!(
                "unsupported database URL scheme '{other}' (use sqlite://PATH or postgres://…)"
            ))),
        }
    }

    pub fn backend(&self) -> Backend {
        match self.pool {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Postgres(_) => Backend::Postgres,
        }
    }

    /// The most connections the pool opens (on SQLite, besides the
    /// delivery path's writer).
    pub fn pool_size(&self) -> u32 {
        match &self.pool {
            Pool::Sqlite(p) => p.options().get_max_connections(),
            Pool::Postgres(p) => p.options().get_max_connections(),
        }
    }

    fn pool(&self) -> &Pool {
        &self.pool
    }

    pub fn pg_schema(&self) -> Option<&str> {
        self.pg_schema.as_deref()
    }

    pub async fn migrate(&self) -> Result<()> {
        match &self.pool {
            Pool::Sqlite(p) => sqlx::migrate!("migrations/sqlite").run(p).await?,
            Pool::Postgres(p) => sqlx::migrate!("migrations/postgres").run(p).await?,
        }
        self.backfill_hosts().await
    }

    /// Whether this node can serve: the database answers and holds every
    /// migration this binary knows. `Err` says why not.
    pub async fn readiness(&self) -> std::result::Result<(), String> {
        let known: Vec<i64> = match &self.pool {
            Pool::Sqlite(_) => sqlx::migrate!("migrations/sqlite")
                .iter()
                .map(|m| m.version)
                .collect(),
            Pool::Postgres(_) => sqlx::migrate!("migrations/postgres")
                .iter()
                .map(|m| m.version)
                .collect(),
        };
        let sql = "SELECT version FROM _sqlx_migrations WHERE success";
        let applied: Vec<i64> = match on_pool!(self, |p| sqlx::query_scalar(sql).fetch_all(p).await)
        {
            Ok(applied) => applied,
            // A database never migrated has no table of migrations yet.
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some("42P01")
                    || e.message().starts_with("no such table") =>
            {
                Vec::new()
            }
            Err(e) => return Err(format!("the database does not answer: {e}")),
        };
        let pending: Vec<String> = known
            .iter()
            .filter(|v| !applied.contains(v))
            .map(|v| format!("{v:04}"))
            .collect();
        if pending.is_empty() {
            Ok(())
        } else {
            Err(format!("migrations pending: {}", pending.join(", ")))
        }
    }

    /// Runs raw SQL; for tests that plant faults (triggers) in a real database.
    #[doc(hidden)]
    pub async fn execute_script(&self, sql: &str) -> Result<()> {
        on_pool!(self, |p| sqlx::raw_sql(sql).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// SQLite's connection for the delivery path's writes and its claim
    /// turn (every SQLite store has them).
    fn sqlite_writer(&self) -> Result<&SqliteWriter> {
        self.writer
            .as_ref()
            .ok_or_else(|| StoreError::Config("this SQLite store has no writer".into()))
    }

    /// Postgres's connections for the delivery path (every Postgres store
    /// has them).
    fn pg_warm(&self) -> Result<&postgres::Warm> {
        self.pg_warm
            .as_deref()
            .ok_or_else(|| StoreError::Config("this Postgres store has no warm connections".into()))
    }

    pub async fn close(&self) {
        if let Some(writer) = &self.writer {
            writer.conn.close().await;
        }
        if let Some(warm) = &self.pg_warm {
            warm.close();
        }
        on_pool!(self, |p| p.close().await)
    }

    /// The session store of this backend, its table created if needed.
    pub async fn sessions(&self) -> Result<Sessions> {
        let sessions = match self.pool() {
            Pool::Sqlite(p) => Sessions::sqlite(p.clone()),
            // A test's private schema keeps its sessions private too.
            Pool::Postgres(p) => {
                Sessions::postgres(p.clone(), self.pg_schema().unwrap_or("tower_sessions"))?
            }
        };
        sessions.migrate().await?;
        Ok(sessions)
    }

    /// The partitions of `deliveries` that rows pass through and that keep
    /// dead index entries until a vacuum (Postgres: waiting, in flight);
    /// none on SQLite, which reuses their space at once.
    pub fn churned_partitions(&self) -> &'static [&'static str] {
        match self.pool {
            Pool::Postgres(_) => &postgres::CHURNED,
            Pool::Sqlite(_) => &[],
        }
    }

    /// Vacuums `partition` (one of `churned_partitions`) if the policy
    /// says it is due (or finds a vacuum already at it), returning the
    /// rows that died or passed through it since its last vacuum; `None`
    /// when nothing was due.
    pub async fn vacuum_if_churned(
        &self,
        partition: &str,
        policy: &VacuumPolicy,
    ) -> Result<Option<i64>> {
        match self.pool() {
            Pool::Postgres(pool) => postgres::vacuum_if_churned(pool, partition, policy).await,
            Pool::Sqlite(_) => Ok(None),
        }
    }
}

fn expect_one(rows: u64) -> Result<()> {
    if rows == 0 {
        Err(StoreError::NotFound)
    } else {
        Ok(())
    }
}

fn conflict_as(e: sqlx::Error, what: &'static str) -> StoreError {
    match StoreError::from(e) {
        StoreError::Conflict(_) => StoreError::Conflict(what),
        other => other,
    }
}

/// Parses a URL just far enough to give one clear line when it is malformed.
pub(crate) fn parse_options<T: FromStr<Err = sqlx::Error>>(url: &str) -> Result<T> {
    T::from_str(url)
        .map_err(|e| StoreError::Config(format!("invalid database URL {}: {e}", redact_url(url))))
}
