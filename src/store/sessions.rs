//! Dashboard sessions kept in the database: tower-sessions' sqlx store of
//! whichever backend is configured, so sessions live beside the rest of
//! the data (`Store::sessions` opens it).

use async_trait::async_trait;
use sqlx::{PgPool, SqlitePool};
use tower_sessions::{
    session::{Id, Record},
    session_store::{self, ExpiredDeletion},
    SessionStore,
};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

use super::{Result, StoreError};

/// The session store of the configured backend.
#[derive(Debug, Clone)]
pub enum Sessions {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl Sessions {
    pub(super) fn sqlite(pool: SqlitePool) -> Sessions {
        Sessions::Sqlite(SqliteStore::new(pool))
    }

    pub(super) fn postgres(pool: PgPool, schema: &str) -> Result<Sessions> {
        let store = PostgresStore::new(pool)
            .with_schema_name(schema)
            .map_err(StoreError::Config)?;
        Ok(Sessions::Postgres(store))
    }

    /// Creates the session table if needed.
    pub(super) async fn migrate(&self) -> Result<()> {
        match self {
            Sessions::Sqlite(s) => s.migrate().await?,
            Sessions::Postgres(s) => s.migrate().await?,
        }
        Ok(())
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
