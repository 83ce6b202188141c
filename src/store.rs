//! Storage: one schema on two backends. SQLite is the embedded default,
//! Postgres is how several nodes share one queue.
//!
//! Almost every query is written once in SQL both backends accept (`$n`
//! placeholders, `ON CONFLICT`, `RETURNING`) and run on whichever pool is
//! configured; what truly differs (connecting, claiming) lives in
//! `store/sqlite.rs` and `store/postgres.rs`.

mod models;
pub mod postgres;
pub mod sqlite;

use std::{str::FromStr, sync::LazyLock};

pub use models::*;
use sqlx::{PgPool, SqlitePool};
pub use vacuum::VacuumPolicy;

use crate::{clock::Timestamp, ids};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("{0} already exists")]
    Conflict(&'static str),
    /// The delivery is no longer held by this claim (rescued or finished elsewhere).
    #[error("claim on delivery {0} is no longer held")]
    LostClaim(String),
    #[error("{0}")]
    Config(String),
    #[error("cannot connect to the database at {url}: {cause}")]
    Connect { url: String, cause: String },
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("database error: {0}")]
    Database(sqlx::Error),
    #[error(transparent)]
    Sealing(#[from] crate::sealing::SealError),
}

impl StoreError {
    /// The database is down, unreachable or locked, rather than refusing
    /// this statement: the same call may well work in a few seconds.
    pub fn is_unavailable(&self) -> bool {
        let StoreError::Database(e) = self else {
            return false;
        };
        match e {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(db) => {
                let code = db.code().unwrap_or_default();
                // SQLite: SQLITE_BUSY and SQLITE_LOCKED (with extended codes).
                // Postgres: connection exceptions (08…), and the server
                // shutting down or starting up (57P01–57P03).
                matches!(code.as_ref(), "5" | "6" | "261" | "262" | "517")
                    || code.starts_with("08")
                    || matches!(code.as_ref(), "57P01" | "57P02" | "57P03")
            }
            _ => false,
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::RowNotFound => StoreError::NotFound,
            sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::Conflict("row"),
            _ => StoreError::Database(e),
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

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
    writer: Option<SqlitePool>,
    /// The Postgres schema this store lives in (tests get one each).
    pg_schema: Option<String>,
    /// Seals endpoint secrets; without it no endpoint can be written or read.
    secrets: Option<std::sync::Arc<crate::sealing::SecretsKey>>,
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
            (Pool::Sqlite(_), Some($pool)) => $body,
            (Pool::Sqlite($pool), None) => $body,
            (Pool::Postgres($pool), _) => $body,
        }
    };
}

mod admin;
mod alerts;
mod claimed;
mod endpoints;
mod events;
mod health;
mod login_failures;
mod rate;
mod replay;
mod retention;
mod sealed_secrets;
mod vacuum;

pub use admin::{AccountOverview, GlobalRates, QueueGauges};
pub use alerts::{ExpiredSince, ExpiringSoon};
pub use claimed::BatchInputs;
pub use endpoints::EndpointPatch;
pub use events::{EventFilter, EventPage};
pub use health::{Health, LastAttempt, WindowStats};
pub use replay::{ReplayCriteria, ReplayGroup, ReplayProgress};
pub use retention::OldHistory;

/// Each active endpoint whose circuit lets work through, with how many
/// more deliveries it may have in flight (`free`, may be ≤ 0): a closed
/// circuit allows `max_in_flight`, a half-open one a single trial. Both
/// backends claim through it, in a transaction no other claim runs beside,
/// so `max_in_flight` holds across every node. `$1` is now.
const CLAIM_SLOTS: &str = "SELECT e.id, \
       CASE WHEN e.circuit_state = 'closed' THEN e.max_in_flight ELSE 1 END \
         - (SELECT count(*) FROM deliveries b \
            WHERE b.endpoint_id = e.id AND b.state = 'in_flight') AS free \
     FROM endpoints e \
     WHERE e.state = 'active' AND (e.circuit_state <> 'open' OR e.circuit_open_until <= $1)";

/// `$from, $from+1, …`: `n` placeholders for an IN list.
fn placeholders(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Endpoints with free slots and due work: `(id, free)`, `$1` now.
/// Built once: every claim and every poll runs it.
static OPEN_SLOTS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT id, free FROM ({CLAIM_SLOTS}) s WHERE free > 0 AND EXISTS ( \
           SELECT 1 FROM deliveries d WHERE d.endpoint_id = s.id AND d.state = 'pending' \
             AND d.next_attempt_at <= $1)"
    )
});

/// Whether any endpoint has a free slot and due work.
static ANY_OPEN_SLOT: LazyLock<String> = LazyLock::new(|| format!("{} LIMIT 1", *OPEN_SLOTS));

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

pub struct NewEndpoint {
    pub account_id: String,
    pub url: String,
    pub description: String,
    pub event_types: Vec<String>,
    pub secret: String,
    pub rate_limit_per_sec: Option<i64>,
    pub max_in_flight: i64,
}

pub struct NewEvent {
    pub account_id: String,
    pub id: String,
    pub event_type: String,
    pub payload: Vec<u8>,
}

#[derive(Debug)]
pub struct InsertedEvent {
    pub event: Event,
    pub deliveries: Vec<Delivery>,
}

/// What one attempt left behind, written together with the delivery's next state.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub attempt: i64,
    pub started_at: i64,
    pub duration_ms: i64,
    pub request_headers: String,
    pub response_status: Option<i64>,
    pub response_headers: Option<String>,
    pub response_body: Option<Vec<u8>>,
    pub error: Option<String>,
    pub classification: String,
}

/// One finished attempt, for `Store::complete_attempts`.
#[derive(Debug, Clone)]
pub struct Completion {
    pub claimed: Delivery,
    pub record: AttemptRecord,
    pub transition: Transition,
    pub now: Timestamp,
}

/// Each endpoint that delivered in `written`, as of its latest success,
/// in id order: recorders on several nodes then lock endpoint rows in the
/// same order and cannot deadlock (a deadlock would fail a whole batch of
/// results, and those deliveries would be sent again).
fn healthy_endpoints<'a>(written: &[&'a Completion]) -> Vec<(&'a str, Timestamp)> {
    let mut healthy: Vec<(&str, Timestamp)> = Vec::new();
    for c in written
        .iter()
        .filter(|c| c.transition == Transition::Delivered)
    {
        match healthy
            .iter_mut()
            .find(|(id, _)| *id == c.claimed.endpoint_id)
        {
            Some((_, at)) => *at = (*at).max(c.now),
            None => healthy.push((&c.claimed.endpoint_id, c.now)),
        }
    }
    healthy.sort_unstable();
    healthy
}

/// The delivery row a completion leaves behind.
pub(crate) struct Outcome {
    pub state: DeliveryState,
    /// Failed attempts to add (a success does not count).
    pub counted: i64,
    pub next_at: i64,
    pub finished_at: Option<i64>,
}

impl Completion {
    pub(crate) fn outcome(&self) -> Outcome {
        let claimed = &self.claimed;
        let (state, counted, next_at) = match self.transition {
            Transition::Delivered => (DeliveryState::Delivered, 0, claimed.next_attempt_at),
            Transition::Retry { next_attempt_at } => {
                (DeliveryState::Pending, 1, next_attempt_at.millis())
            }
            Transition::Failed => (DeliveryState::Failed, 1, claimed.next_attempt_at),
            Transition::Expired => (DeliveryState::Expired, 1, claimed.next_attempt_at),
        };
        Outcome {
            state,
            counted,
            next_at,
            finished_at: state.is_terminal().then_some(self.now.millis()),
        }
    }
}

/// Where a claimed delivery goes after its attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Delivered,
    Retry { next_attempt_at: Timestamp },
    Failed,
    Expired,
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

    pub fn pool(&self) -> &Pool {
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
        Ok(())
    }

    /// Runs raw SQL; for tests that plant faults (triggers) in a real database.
    #[doc(hidden)]
    pub async fn execute_script(&self, sql: &str) -> Result<()> {
        on_pool!(self, |p| sqlx::raw_sql(sql).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    pub async fn close(&self) {
        if let Some(writer) = &self.writer {
            writer.close().await;
        }
        on_pool!(self, |p| p.close().await)
    }

    // ---- accounts --------------------------------------------------------

    pub async fn create_account(&self, name: &str, now: Timestamp) -> Result<Account> {
        let sql = "INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, $3) RETURNING *";
        let id = ids::new_id(ids::ACCOUNT);
        on_pool!(self, |p| sqlx::query_as::<_, Account>(sql)
            .bind(&id)
            .bind(name)
            .bind(now.millis())
            .fetch_one(p)
            .await)
        .map_err(|e| conflict_as(e, "an account with this name"))
    }

    pub async fn account(&self, id: &str) -> Result<Account> {
        let sql = "SELECT * FROM accounts WHERE id = $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Account>(sql)
            .bind(id)
            .fetch_one(p)
            .await)?)
    }

    pub async fn account_by_name(&self, name: &str) -> Result<Account> {
        let sql = "SELECT * FROM accounts WHERE name = $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Account>(sql)
            .bind(name)
            .fetch_one(p)
            .await)?)
    }

    pub async fn list_accounts(&self) -> Result<Vec<Account>> {
        let sql = "SELECT * FROM accounts ORDER BY name";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Account>(sql)
            .fetch_all(p)
            .await)?)
    }

    // ---- users -----------------------------------------------------------

    pub async fn create_user(
        &self,
        account_id: &str,
        email: &str,
        password_hash: &str,
        role: Role,
        now: Timestamp,
    ) -> Result<User> {
        let sql = "INSERT INTO users (id, account_id, email, password_hash, role, created_at) \
                   VALUES ($1, $2, $3, $4, $5, $6) RETURNING *";
        let id = ids::new_id(ids::USER);
        on_pool!(self, |p| sqlx::query_as::<_, User>(sql)
            .bind(&id)
            .bind(account_id)
            .bind(email)
            .bind(password_hash)
            .bind(role.as_str())
            .bind(now.millis())
            .fetch_one(p)
            .await)
        .map_err(|e| conflict_as(e, "a user with this email"))
    }

    pub async fn user(&self, id: &str) -> Result<User> {
        let sql = "SELECT * FROM users WHERE id = $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, User>(sql)
            .bind(id)
            .fetch_one(p)
            .await)?)
    }

    pub async fn user_by_email(&self, email: &str) -> Result<User> {
        let sql = "SELECT * FROM users WHERE email = $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, User>(sql)
            .bind(email)
            .fetch_one(p)
            .await)?)
    }

    pub async fn set_password(&self, user_id: &str, password_hash: &str) -> Result<()> {
        let sql = "UPDATE users SET password_hash = $1 WHERE id = $2";
        let n = on_pool!(self, |p| sqlx::query(sql)
            .bind(password_hash)
            .bind(user_id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        expect_one(n)
    }

    pub async fn count_users(&self) -> Result<i64> {
        let sql = "SELECT COUNT(*) FROM users";
        Ok(on_pool!(self, |p| sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(p)
            .await)?)
    }

    // ---- API keys --------------------------------------------------------

    pub async fn create_api_key(
        &self,
        account_id: &str,
        prefix: &str,
        key_hash: &str,
        is_admin: bool,
        now: Timestamp,
    ) -> Result<ApiKey> {
        let sql = "INSERT INTO api_keys (id, account_id, prefix, key_hash, is_admin, created_at) \
                   VALUES ($1, $2, $3, $4, $5, $6) RETURNING *";
        let id = ids::new_id(ids::API_KEY);
        on_pool!(self, |p| sqlx::query_as::<_, ApiKey>(sql)
            .bind(&id)
            .bind(account_id)
            .bind(prefix)
            .bind(key_hash)
            .bind(is_admin)
            .bind(now.millis())
            .fetch_one(p)
            .await)
        .map_err(|e| conflict_as(e, "an API key with this hash"))
    }

    /// A key that exists and is not revoked.
    pub async fn active_api_key(&self, key_hash: &str) -> Result<ApiKey> {
        let sql = "SELECT * FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, ApiKey>(sql)
            .bind(key_hash)
            .fetch_one(p)
            .await)?)
    }

    pub async fn list_api_keys(&self, account_id: &str) -> Result<Vec<ApiKey>> {
        let sql = "SELECT * FROM api_keys WHERE account_id = $1 ORDER BY created_at DESC, id";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, ApiKey>(sql)
            .bind(account_id)
            .fetch_all(p)
            .await)?)
    }

    pub async fn revoke_api_key(&self, account_id: &str, id: &str, now: Timestamp) -> Result<()> {
        let sql = "UPDATE api_keys SET revoked_at = $1 \
                   WHERE account_id = $2 AND id = $3 AND revoked_at IS NULL";
        let done = on_pool!(self, |p| sqlx::query(sql)
            .bind(now.millis())
            .bind(account_id)
            .bind(id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        expect_one(done)
    }

    // ---- endpoints -------------------------------------------------------

    pub async fn create_endpoint(&self, new: NewEndpoint, now: Timestamp) -> Result<Endpoint> {
        let sql = "INSERT INTO endpoints (id, account_id, url, description, event_types, secret, \
                   rate_limit_per_sec, max_in_flight, created_at, updated_at) \
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING *";
        let id = ids::new_id(ids::ENDPOINT);
        let types = serde_json::to_string(&new.event_types).unwrap_or_else(|_| "[]".into());
        let sealed = self.secrets_key()?.seal(&id, &new.secret);
        let ep = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(&id)
            .bind(&new.account_id)
            .bind(&new.url)
            .bind(&new.description)
            .bind(&types)
            .bind(&sealed)
            .bind(new.rate_limit_per_sec)
            .bind(new.max_in_flight)
            .bind(now.millis())
            .fetch_one(p)
            .await)?;
        self.opened(ep)
    }

    /// An endpoint of this account; another account's id is simply not found.
    pub async fn endpoint(&self, account_id: &str, id: &str) -> Result<Endpoint> {
        let sql = "SELECT * FROM endpoints WHERE account_id = $1 AND id = $2";
        let ep = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
    }

    pub async fn list_endpoints(&self, account_id: &str) -> Result<Vec<Endpoint>> {
        let sql = "SELECT * FROM endpoints WHERE account_id = $1 ORDER BY created_at, id";
        let eps = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(account_id)
            .fetch_all(p)
            .await)?;
        self.opened_all(eps)
    }

    pub async fn set_endpoint_state(
        &self,
        account_id: &str,
        id: &str,
        state: &str,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<Endpoint> {
        let sql = "UPDATE endpoints SET state = $1, pause_reason = $2, updated_at = $3 \
                   WHERE account_id = $4 AND id = $5 RETURNING *";
        let ep = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(state)
            .bind(reason)
            .bind(now.millis())
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
    }

    // ---- events and deliveries --------------------------------------------

    /// Stores the event and one `pending` delivery per subscribed endpoint
    /// (paused ones too: skipping them would lose data; disabled ones not),
    /// all in one transaction. A producer id seen before is a `Conflict`
    /// and leaves nothing behind.
    pub async fn insert_event(
        &self,
        new: NewEvent,
        now: Timestamp,
        give_up_at: Timestamp,
    ) -> Result<InsertedEvent> {
        self.insert_event_for(new, None, now, give_up_at).await
    }

    /// Like `insert_event`; with `only` set, the event goes to that one
    /// endpoint whatever its filter (the dashboard's "send test event").
    pub async fn insert_event_for(
        &self,
        new: NewEvent,
        only: Option<&str>,
        now: Timestamp,
        give_up_at: Timestamp,
    ) -> Result<InsertedEvent> {
        // The write comes first so SQLite takes its write lock at once
        // instead of upgrading a read lock (which can fail with SQLITE_BUSY).
        let insert_event = "INSERT INTO events (account_id, id, event_type, payload, created_at) \
                            VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING *";
        let endpoints = "SELECT * FROM endpoints WHERE account_id = $1 AND state <> 'disabled' \
                         ORDER BY created_at, id";
        let insert_delivery = "INSERT INTO deliveries (id, account_id, event_id, endpoint_id, \
                               state, next_attempt_at, give_up_at, created_at, updated_at) \
                               VALUES ($1, $2, $3, $4, 'pending', $5, $6, $5, $5) RETURNING *";
        on_writer!(self, |p| {
            let mut tx = p.begin().await?;
            let Some(event) = sqlx::query_as::<_, Event>(insert_event)
                .bind(&new.account_id)
                .bind(&new.id)
                .bind(&new.event_type)
                .bind(&new.payload)
                .bind(now.millis())
                .fetch_optional(&mut *tx)
                .await?
            else {
                tx.rollback().await?;
                return Err(StoreError::Conflict("an event with this id"));
            };
            let targets = sqlx::query_as::<_, Endpoint>(endpoints)
                .bind(&new.account_id)
                .fetch_all(&mut *tx)
                .await?;
            let mut deliveries = Vec::new();
            let chosen = targets.iter().filter(|e| match only {
                Some(id) => e.id == id,
                None => e.wants(&event.event_type),
            });
            for endpoint in chosen {
                let delivery = sqlx::query_as::<_, Delivery>(insert_delivery)
                    .bind(ids::new_id(ids::DELIVERY))
                    .bind(&event.account_id)
                    .bind(&event.id)
                    .bind(&endpoint.id)
                    .bind(now.millis())
                    .bind(give_up_at.millis())
                    .fetch_one(&mut *tx)
                    .await?;
                deliveries.push(delivery);
            }
            tx.commit().await?;
            Ok(InsertedEvent { event, deliveries })
        })
    }

    pub async fn event(&self, account_id: &str, id: &str) -> Result<Event> {
        let sql = "SELECT * FROM events WHERE account_id = $1 AND id = $2";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Event>(sql)
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?)
    }

    pub async fn deliveries_of_event(
        &self,
        account_id: &str,
        event_id: &str,
    ) -> Result<Vec<Delivery>> {
        let sql = "SELECT * FROM deliveries WHERE account_id = $1 AND event_id = $2 \
                   ORDER BY created_at, id";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Delivery>(sql)
            .bind(account_id)
            .bind(event_id)
            .fetch_all(p)
            .await)?)
    }

    pub async fn delivery(&self, id: &str) -> Result<Delivery> {
        let sql = "SELECT * FROM deliveries WHERE id = $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Delivery>(sql)
            .bind(id)
            .fetch_one(p)
            .await)?)
    }

    pub async fn attempts_of_delivery(&self, delivery_id: &str) -> Result<Vec<Attempt>> {
        let sql = "SELECT * FROM attempts WHERE delivery_id = $1 ORDER BY attempt";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Attempt>(sql)
            .bind(delivery_id)
            .fetch_all(p)
            .await)?)
    }

    pub async fn count_deliveries(&self, state: DeliveryState) -> Result<i64> {
        let sql = "SELECT COUNT(*) FROM deliveries WHERE state = $1";
        Ok(on_pool!(self, |p| sqlx::query_scalar::<_, i64>(sql)
            .bind(state.as_str())
            .fetch_one(p)
            .await)?)
    }

    // ---- the queue ---------------------------------------------------------

    /// Takes up to `limit` due deliveries, within each endpoint's free
    /// in-flight slots (see `CLAIM_SLOTS`), and leases them until
    /// `lease_until`. No two claimers ever receive the same row.
    pub async fn claim_due(
        &self,
        now: Timestamp,
        lease_until: Timestamp,
        limit: i64,
    ) -> Result<Vec<Delivery>> {
        let mut claimed = match &self.pool {
            Pool::Sqlite(p) => {
                // Most polls and wakes find nothing due: learn that from a
                // plain read before taking the one writer. (On Postgres the
                // same probe measured slower than just claiming.)
                let found = sqlx::query(&ANY_OPEN_SLOT)
                    .bind(now.millis())
                    .fetch_optional(p)
                    .await?;
                if found.is_none() {
                    return Ok(Vec::new());
                }
                let writer = self.writer.as_ref().unwrap_or(p);
                sqlite::claim_due(writer, now, lease_until, limit).await?
            }
            Pool::Postgres(p) => postgres::claim_due(p, now, lease_until, limit).await?,
        };
        claimed.sort_by(|a, b| (a.next_attempt_at, &a.id).cmp(&(b.next_attempt_at, &b.id)));
        Ok(claimed)
    }

    /// Writes the attempt and moves the delivery on, atomically, provided the
    /// caller still holds the claim it was given.
    pub async fn complete_attempt(
        &self,
        claimed: &Delivery,
        record: &AttemptRecord,
        transition: Transition,
        now: Timestamp,
    ) -> Result<Delivery> {
        let one = Completion {
            claimed: claimed.clone(),
            record: record.clone(),
            transition,
            now,
        };
        let mut answers = self.complete_attempts(std::slice::from_ref(&one)).await?;
        answers
            .pop()
            .unwrap_or_else(|| Err(StoreError::LostClaim(claimed.id.clone())))
    }

    /// Writes many attempts in one transaction (group commit; one commit
    /// per batch is most of what makes the engine fast). Each is written
    /// only if its claim is still held and answers for itself; an endpoint
    /// that delivered is marked healthy once, as of its latest success.
    pub async fn complete_attempts(&self, batch: &[Completion]) -> Result<Vec<Result<Delivery>>> {
        let insert_attempt =
            "INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, \
                              request_headers, response_status, response_headers, response_body, \
                              error, classification, endpoint_id) \
                              VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";
        let update = "UPDATE deliveries SET state = $1, attempts = attempts + $2, \
                      attempt_seq = $3, next_attempt_at = $4, claimed_at = NULL, lease_until = NULL, claim_token = NULL, \
                      last_status = $5, last_response = $6, last_error = $7, finished_at = $8, \
                      updated_at = $9 \
                      WHERE id = $10 AND state = 'in_flight' AND claim_token = $11 RETURNING *";
        if let Pool::Postgres(p) = &self.pool {
            return postgres::complete_attempts(p, batch).await;
        }
        let mut written: Vec<&Completion> = Vec::with_capacity(batch.len());
        on_writer!(self, |p| {
            let mut tx = p.begin().await?;
            let mut answers = Vec::with_capacity(batch.len());
            for c in batch {
                let (claimed, record) = (&c.claimed, &c.record);
                let Outcome {
                    state,
                    counted,
                    next_at,
                    finished_at,
                } = c.outcome();
                let updated = sqlx::query_as::<_, Delivery>(update)
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
                sqlx::query(endpoints::ENDPOINT_SUCCEEDED)
                    .bind(at.millis())
                    .bind(endpoint_id)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(answers)
        })
    }

    /// Puts a claimed delivery back as it was before the claim: no attempt
    /// counted, schedule unchanged. For faults of the worker, not the receiver.
    pub async fn release_claim(&self, claimed: &Delivery, now: Timestamp) -> Result<()> {
        let sql =
            "UPDATE deliveries SET state = 'pending', claimed_at = NULL, lease_until = NULL, \
                   updated_at = $1, claim_token = NULL \
                   WHERE id = $2 AND state = 'in_flight' AND claim_token = $3";
        let done = on_writer!(self, |p| sqlx::query(sql)
            .bind(now.millis())
            .bind(&claimed.id)
            .bind(&claimed.claim_token)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        claim_held(done, claimed)
    }

    /// Tells the workers of every node that work is due now. Within one
    /// process the engine wakes its own workers; Postgres carries it further.
    pub async fn announce_work(&self) -> Result<()> {
        self.announce_work_from("").await
    }

    /// Like `announce_work`, naming the node that announces, so its own
    /// listener can let it pass (its workers were woken directly).
    pub async fn announce_work_from(&self, origin: &str) -> Result<()> {
        match &self.pool {
            Pool::Sqlite(_) => Ok(()),
            Pool::Postgres(p) => {
                postgres::announce_work(p, self.pg_schema.as_deref(), origin).await
            }
        }
    }

    /// A stream of "work is due" announcements from every node; `None` on
    /// SQLite, where all workers live in this process.
    pub async fn listen_for_work(&self) -> Result<Option<sqlx::postgres::PgListener>> {
        let Pool::Postgres(p) = &self.pool else {
            return Ok(None);
        };
        let mut listener = sqlx::postgres::PgListener::connect_with(p).await?;
        listener
            .listen(&postgres::work_channel(self.pg_schema.as_deref()))
            .await?;
        Ok(Some(listener))
    }

    /// Returns `in_flight` rows whose lease has run out (a crashed or stuck
    /// worker) to `pending`, without counting an attempt. Returns how many.
    pub async fn rescue_expired_leases(&self, now: Timestamp) -> Result<u64> {
        let sql = "UPDATE deliveries SET state = 'pending', claimed_at = NULL, lease_until = NULL, \
                   claim_token = NULL, updated_at = $1 WHERE state = 'in_flight' AND lease_until <= $1";
        let done = on_writer!(self, |p| sqlx::query(sql)
            .bind(now.millis())
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(done)
    }
}

fn expect_one(rows: u64) -> Result<()> {
    if rows == 0 {
        Err(StoreError::NotFound)
    } else {
        Ok(())
    }
}

/// An update guarded by the claim token touched no row: the claim was lost
/// (rescued, or finished elsewhere).
fn claim_held(rows: u64, claimed: &Delivery) -> Result<()> {
    if rows == 1 {
        Ok(())
    } else {
        Err(StoreError::LostClaim(claimed.id.clone()))
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
