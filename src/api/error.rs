//! The REST API's errors: `{"error":{"code":"…","message":"…"}}` with a
//! fitting status. Internal details are logged, never sent.

use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;

use crate::{error::Error, store::StoreError};

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub retry_after_secs: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

/// How every API error looks on the wire (for the OpenAPI document).
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorOut {
    error: ErrorDetail,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable, for programs: `invalid_url`, `not_found`, `rate_limited` …
    code: String,
    /// For people: what was wrong and how to fix it.
    message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after_secs: None,
        }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} not found"),
        )
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    pub fn too_many_requests(retry_after_secs: u64, message: impl Into<String>) -> Self {
        ApiError {
            retry_after_secs: Some(retry_after_secs.max(1)),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
        }
    }

    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "something went wrong on our side; it has been logged",
        )
    }

    pub fn unavailable() -> Self {
        ApiError {
            retry_after_secs: Some(5),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the database is not reachable right now; nothing was stored, try again",
            )
        }
    }
}

/// A domain error as the API answers it: the status and code its kind
/// calls for; a failure of ours is logged and answered without detail.
impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::NotFound(what) => ApiError::not_found(what),
            Error::Invalid { code, message } => ApiError::bad_request(code, message),
            Error::Conflict(message) => ApiError::conflict(message),
            Error::ConflictCode { code, message } => {
                ApiError::new(StatusCode::CONFLICT, code, message)
            }
            Error::RateLimited {
                message,
                retry_after_s,
            } => ApiError::too_many_requests(retry_after_s, message),
            Error::Unauthorized(message) => ApiError::unauthorized(message),
            Error::Store(e) if e.is_unavailable() => {
                tracing::error!(error = %e, "database unavailable");
                ApiError::unavailable()
            }
            e => {
                tracing::error!(error = %e, "store error");
                ApiError::internal()
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        Error::from(e).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "code": self.code, "message": self.message } });
        let mut res = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after_secs {
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                res.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        res
    }
}
