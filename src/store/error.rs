//! What can go wrong in the store: a miss, a conflict, a lost claim, or the
//! database itself; callers tell "not there" from "try again later".

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("{0} already exists")]
    Conflict(&'static str),
    /// The delivery is no longer held by this claim (rescued or finished elsewhere).
    #[error("claim on delivery {0} is no longer held")]
    LostClaim(String),
    /// The API key an event came with was revoked (or its account
    /// deleted) before the write: nothing was stored.
    #[error("the API key was revoked")]
    KeyRevoked,
    /// Nothing of this item was written, though others of its group were:
    /// the same call may well work again.
    #[error("{0}")]
    Unwritten(String),
    #[error("{0}")]
    Config(String),
    #[error("cannot connect to the database at {url}: {cause}")]
    Connect { url: String, cause: String },
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("database error: {0}")]
    Database(sqlx::Error),
    /// From SQLite's direct connection (`sqlite::Writer::direct`).
    #[error("database error: {0}")]
    Direct(rusqlite::Error),
    #[error(transparent)]
    Sealing(#[from] crate::sealing::SealError),
}

impl StoreError {
    /// The database is down, unreachable or locked, or a row the statement
    /// meant to change was just moved (`is_moved`), rather than refusing
    /// this statement: the same call may well work in a few seconds.
    pub fn is_unavailable(&self) -> bool {
        if self.is_moved() || matches!(self, StoreError::Unwritten(_)) {
            return true;
        }
        if let StoreError::Direct(rusqlite::Error::SqliteFailure(e, _)) = self {
            return matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            );
        }
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

    /// Postgres refused a change to a row that another transaction had
    /// just moved to another partition (40001; deliveries are partitioned
    /// by state, migration 0022). Run again, the statement finds the row
    /// where it went, or finds it gone.
    fn is_moved(&self) -> bool {
        matches!(self, StoreError::Database(sqlx::Error::Database(db))
            if db.code().as_deref() == Some("40001"))
    }
}

/// Runs `op` again, a few times, while it fails with `is_moved`: the
/// engine's own writes (claims, results, hand-backs, lease rescue) race
/// each other on the same rows only at a lease's end, and must not fail
/// for it.
pub(super) async fn retry_moved<T, E, F, Fut>(mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, E>>,
    StoreError: From<E>,
{
    for _ in 0..3 {
        match op().await.map_err(StoreError::from) {
            Err(e) if e.is_moved() => continue,
            other => return other,
        }
    }
    op().await.map_err(StoreError::from)
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

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match &e {
            rusqlite::Error::QueryReturnedNoRows => StoreError::NotFound,
            rusqlite::Error::SqliteFailure(f, _)
                if matches!(
                    f.extended_code,
                    rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                        | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                ) =>
            {
                StoreError::Conflict("row")
            }
            _ => StoreError::Direct(e),
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
