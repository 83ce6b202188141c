//! The one error type that crosses from server functions to the browser:
//! stable, serializable, and free of internal detail.

use leptos::server_fn::{
    codec::JsonEncoding,
    error::{FromServerFnError, ServerFnErrorErr},
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AppError {
    #[error("please sign in")]
    Unauthorized,
    #[error("you are not allowed to do this")]
    Forbidden,
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    #[error("too many resends for this endpoint; try again in {retry_after_s} s")]
    RateLimited {
        retry_after_s: u64,
        /// The delivery whose resend was refused, so a page without
        /// JavaScript (which learns of it from the URL) marks that one.
        #[serde(default)]
        delivery_id: Option<String>,
    },
    #[error("something went wrong on our side; it has been logged")]
    Internal,
    #[error("the request did not reach the server: {0}")]
    Transport(String),
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        AppError::Transport(value.to_string())
    }
}
