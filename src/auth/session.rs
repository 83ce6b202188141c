//! Dashboard sessions: tower-sessions with the sqlx store of whichever
//! backend is configured, so sessions live beside the rest of the data.

use async_trait::async_trait;
use tower_sessions::{
    cookie::{time::Duration, SameSite},
    session::{Id, Record},
    session_store::{self, ExpiredDeletion},
    Expiry, SessionManagerLayer, SessionStore,
};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

use crate::store::{Pool, Store, StoreError};

pub const USER_ID_KEY: &str = "user_id";
/// When the user signed in and when they were last seen, in the code's
/// clock (milliseconds), for the absolute and idle timeouts.
pub const SIGNED_IN_AT_KEY: &str = "signed_in_at";
pub const SEEN_AT_KEY: &str = "seen_at";
pub const COOKIE_NAME: &str = "dakghar_session";
/// Over https the browser only accepts this name with `Secure`, `Path=/`
/// and no `Domain`: a sibling subdomain cannot plant or shadow it.
pub const SECURE_COOKIE_NAME: &str = "__Host-dakghar_session";

/// The session store of the configured backend.
#[derive(Debug, Clone)]
pub enum Sessions {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl Sessions {
    /// Creates the session table if needed.
    pub async fn open(store: &Store) -> Result<Sessions, StoreError> {
        let sessions = match store.pool() {
            Pool::Sqlite(p) => Sessions::Sqlite(SqliteStore::new(p.clone())),
            Pool::Postgres(p) => {
                // A test's private schema keeps its sessions private too.
                let schema = store.pg_schema().unwrap_or("tower_sessions");
                let s = PostgresStore::new(p.clone())
                    .with_schema_name(schema)
                    .map_err(StoreError::Config)?;
                Sessions::Postgres(s)
            }
        };
        match &sessions {
            Sessions::Sqlite(s) => s.migrate().await?,
            Sessions::Postgres(s) => s.migrate().await?,
        }
        Ok(sessions)
    }

    /// The cookie and the stored record expire after `idle` without use;
    /// the guard enforces both timeouts on the code's clock as well.
    pub fn layer(&self, secure: bool, idle: std::time::Duration) -> SessionManagerLayer<Sessions> {
        let idle = Duration::try_from(idle).unwrap_or(Duration::hours(12));
        SessionManagerLayer::new(self.clone())
            .with_name(if secure {
                SECURE_COOKIE_NAME
            } else {
                COOKIE_NAME
            })
            .with_path("/")
            .with_http_only(true)
            .with_same_site(SameSite::Lax)
            .with_secure(secure)
            .with_expiry(Expiry::OnInactivity(idle))
    }

    /// Removes expired sessions now and then, for as long as the server runs.
    pub fn spawn_cleaner(&self) {
        let sessions = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(std::time::Duration::from_secs(3600));
            loop {
                every.tick().await;
                if let Err(e) = sessions.delete_expired().await {
                    tracing::warn!(error = %e, "could not delete expired sessions");
                }
            }
        });
    }
}

#[async_trait]
impl SessionStore for Sessions {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            Sessions::Sqlite(s) => s.create(record).await,
            Sessions::Postgres(s) => s.create(record).await,
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        match self {
            Sessions::Sqlite(s) => s.save(record).await,
            Sessions::Postgres(s) => s.save(record).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match self {
            Sessions::Sqlite(s) => s.load(id).await,
            Sessions::Postgres(s) => s.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match self {
            Sessions::Sqlite(s) => s.delete(id).await,
            Sessions::Postgres(s) => s.delete(id).await,
        }
    }
}

#[async_trait]
impl ExpiredDeletion for Sessions {
    async fn delete_expired(&self) -> session_store::Result<()> {
        match self {
            Sessions::Sqlite(s) => s.delete_expired().await,
            Sessions::Postgres(s) => s.delete_expired().await,
        }
    }
}
