//! The crate's error for every domain action: what went wrong in words a
//! caller may be shown, or a failure of ours to log and hide. Each face
//! turns it into its own answer through `From` (`api::error::ApiError`, the
//! dashboard's `AppError`), so no call site maps errors by hand.

use crate::{auth::password::PasswordError, store::StoreError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// It does not exist, or belongs to another account: the same answer.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// Input that breaks a rule; `code` is stable, for programs.
    #[error("{message}")]
    Invalid { code: &'static str, message: String },
    /// Not in a state that allows this, or already there.
    #[error("{0}")]
    Conflict(String),
    /// A conflict a program must tell apart from others, by `code`.
    #[error("{message}")]
    ConflictCode { code: &'static str, message: String },
    /// Over a budget; worth trying again in `retry_after_s`.
    #[error("{message}")]
    RateLimited { message: String, retry_after_s: u64 },
    /// No valid credentials.
    #[error("{0}")]
    Unauthorized(String),
    #[error(transparent)]
    Store(StoreError),
    #[error(transparent)]
    Password(#[from] PasswordError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid {
            code,
            message: message.into(),
        }
    }

    /// What went wrong in a word, with none of the details (for traces).
    pub fn code(&self) -> &'static str {
        match self {
            Error::NotFound(_) => "not_found",
            Error::Invalid { code, .. } | Error::ConflictCode { code, .. } => code,
            Error::Conflict(_) => "conflict",
            Error::RateLimited { .. } => "rate_limited",
            Error::Unauthorized(_) => "unauthorized",
            Error::Store(_) => "store",
            Error::Password(_) => "password",
        }
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => Error::NotFound("resource"),
            StoreError::Conflict(what) => Error::Conflict(format!("{what} already exists")),
            StoreError::KeyRevoked => crate::accounts::revoked(),
            e => Error::Store(e),
        }
    }
}

/// A store miss named for what was missing.
pub trait OrNotFound<T> {
    fn or_not_found(self, what: &'static str) -> Result<T>;
}

impl<T> OrNotFound<T> for Result<T, StoreError> {
    fn or_not_found(self, what: &'static str) -> Result<T> {
        self.map_err(|e| match e {
            StoreError::NotFound => Error::NotFound(what),
            e => e.into(),
        })
    }
}
