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
    /// A form refused field by field.
    #[error("{}", .0.summary())]
    Fields(FieldErrors),
    #[error("{0}")]
    Conflict(String),
    /// Resends and recoveries each have a budget per endpoint.
    #[error("too many for this endpoint right now; try again in {retry_after_s} s")]
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

/// What was wrong with each field of a form, and what was typed: a page
/// without JavaScript learns of the refusal from the URL it is sent back
/// to, and must show the values again beside their errors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldErrors {
    /// (field, message), in the form's order.
    pub errors: Vec<(String, String)>,
    /// (field, value) as submitted.
    pub typed: Vec<(String, String)>,
}

impl FieldErrors {
    pub fn error(&self, field: &str) -> Option<&str> {
        find(&self.errors, field)
    }

    pub fn typed(&self, field: &str) -> Option<&str> {
        find(&self.typed, field)
    }

    pub fn summary(&self) -> String {
        let messages: Vec<&str> = self.errors.iter().map(|(_, m)| m.as_str()).collect();
        format!("Please correct this: {}.", messages.join("; "))
    }
}

fn find<'a>(pairs: &'a [(String, String)], field: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(f, _)| f == field)
        .map(|(_, v)| v.as_str())
}
