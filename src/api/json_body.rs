//! A request body as the document describes it: JSON (else 415), an object
//! (serde would also read a struct from an array: `[null, null]` passed
//! for a patch changing nothing), and fields of the declared types, where
//! an integer may be written `5.0` as JSON Schema allows.

use axum::{
    body::Bytes,
    extract::{FromRequest, Request},
    http::{header, StatusCode},
};
use serde::{de::DeserializeOwned, Deserialize, Deserializer};

use super::error::ApiError;

pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
        if !is_json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as content-type: application/json",
            ));
        }
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::bad_request("invalid_body", e.body_text()))?;
        let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::bad_request("invalid_body", format!("the body is not JSON: {e}"))
        })?;
        if !value.is_object() {
            return Err(ApiError::bad_request(
                "invalid_body",
                "the body must be a JSON object",
            ));
        }
        serde_json::from_value(value)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request("invalid_body", e.to_string()))
    }
}

/// A body that may be left out: nothing (or only spaces) is `None`; else a
/// JSON object of `T`.
pub fn optional<T: DeserializeOwned>(raw: &[u8]) -> Result<Option<T>, ApiError> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: serde_json::Value = serde_json::from_slice(raw)
        .map_err(|e| ApiError::bad_request("invalid_body", format!("the body is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "invalid_body",
            "the body must be a JSON object",
        ));
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| ApiError::bad_request("invalid_body", e.to_string()))
}

/// An optional whole number that may be written as `5` or `5.0`.
pub fn integral<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let n = Option::<serde_json::Number>::deserialize(d)?;
    n.map(|n| {
        n.as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            })
            .ok_or_else(|| serde::de::Error::custom(format!("{n} is not a whole number")))
    })
    .transpose()
}
