//! Who is calling the API: `Authorization: Bearer <api key>`.

use std::sync::Arc;

use axum::{extract::FromRequestParts, http::request::Parts};

use super::error::ApiError;
use crate::{auth::api_key, context::AppState, store::StoreError};

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
        match ctx.store.active_api_key(&api_key::hash(key)).await {
            Ok(k) => Ok(Caller {
                account_id: k.account_id,
                key_id: k.id,
                is_admin: k.is_admin,
            }),
            Err(StoreError::NotFound) => Err(ApiError::unauthorized("unknown or revoked API key")),
            Err(e) => Err(e.into()),
        }
    }
}
