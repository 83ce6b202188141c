//! Who is calling the API: `Authorization: Bearer <api key>`.

use std::sync::Arc;

use axum::{extract::FromRequestParts, http::request::Parts};

use super::error::ApiError;
use crate::{accounts, context::AppState};

/// An authenticated producer. Every query made for it is scoped by `account_id`.
#[derive(Debug, Clone)]
pub struct Caller {
    pub account_id: String,
    pub key_id: String,
    pub is_admin: bool,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let ctx = Arc::clone(&state.ctx);
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or_else(|| ApiError::unauthorized("missing Authorization: Bearer <api key>"))?;
        let key = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| ApiError::unauthorized("Authorization must be: Bearer <api key>"))?;
        let k = accounts::authenticate(&ctx.store, key).await?;
        Ok(Caller {
            account_id: k.account_id,
            key_id: k.id,
            is_admin: k.is_admin,
        })
    }
}
