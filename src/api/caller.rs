//! Who is calling the API (`Authorization: Bearer <api key>`) and the
//! account the call acts on: an account's key acts on its own account at
//! `/api/v1/…`; a platform key on any account, named in the path, at
//! `/api/v1/accounts/{account}/…` (by id or the platform's external id).

use std::sync::Arc;

use axum::{
    extract::{FromRequestParts, RawPathParams},
    http::request::Parts,
};

use super::error::ApiError;
use crate::{
    accounts::{self, platform, KeyHolder},
    context::AppState,
};

/// An authenticated caller acting on one account. Every query made for it
/// is scoped by `account_id`.
#[derive(Debug, Clone)]
pub struct Caller {
    pub account_id: String,
    pub key_id: String,
    /// An account's admin key: it may call the admin API too.
    pub is_admin: bool,
}

impl Caller {
    /// How the audit log names the caller.
    pub fn actor(&self) -> String {
        format!("api_key:{}", self.key_id)
    }
}

/// The key behind the Authorization header.
pub async fn key_holder(parts: &Parts, state: &AppState) -> Result<KeyHolder, ApiError> {
    Ok(accounts::authenticate(&state.ctx, bearer(parts)?).await?)
}

fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    let header = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("missing Authorization: Bearer <api key>"))?;
    header
        .to_str()
        .ok()
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ApiError::unauthorized("Authorization must be: Bearer <api key>"))
}

/// The `{account}` of a `/api/v1/accounts/{account}/…` route, if this is one.
async fn account_in_path(parts: &mut Parts, state: &AppState) -> Option<String> {
    let params = RawPathParams::from_request_parts(parts, state).await.ok()?;
    params
        .iter()
        .find(|(name, _)| *name == "account")
        .map(|(_, value)| value.to_string())
}

/// The account `holder` acts on at this route.
async fn acting(
    parts: &mut Parts,
    state: &AppState,
    holder: KeyHolder,
) -> Result<Caller, ApiError> {
    let ctx = Arc::clone(&state.ctx);
    match (holder, account_in_path(parts, state).await) {
        (KeyHolder::Account(k), None) => Ok(Caller {
            account_id: k.account_id,
            key_id: k.id,
            is_admin: k.is_admin,
        }),
        (KeyHolder::Platform(k), Some(reference)) => {
            let account = platform::account(&ctx.store, &reference).await?;
            Ok(Caller {
                account_id: account.id,
                key_id: k.id,
                is_admin: false,
            })
        }
        (KeyHolder::Account(_), Some(_)) => Err(ApiError::forbidden(
            "/api/v1/accounts/… needs a platform key; an account's key acts at /api/v1/…",
        )),
        (KeyHolder::Platform(_), None) => Err(ApiError::forbidden(
            "a platform key names the account: /api/v1/accounts/{account}/…",
        )),
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let holder = key_holder(parts, state).await?;
        acting(parts, state, holder).await
    }
}

/// A caller about to ingest. Its key may be one this node saw before and
/// did not look up again (`accounts::producer`): whatever it does with
/// it must pass `key_id` to the write, which checks the key is active.
#[derive(Debug, Clone)]
pub struct Producer(pub Caller);

impl FromRequestParts<AppState> for Producer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let key = bearer(parts)?.to_string();
        let holder = accounts::producer(&state.ctx, &key).await?;
        Ok(Producer(acting(parts, state, holder).await?))
    }
}

/// A platform key, for the accounts API itself.
#[derive(Debug, Clone, Copy)]
pub struct Platform;

impl FromRequestParts<AppState> for Platform {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match key_holder(parts, state).await? {
            KeyHolder::Platform(_) => Ok(Platform),
            KeyHolder::Account(_) => Err(ApiError::forbidden("this needs a platform key")),
        }
    }
}

/// The `{id}` of a route, whatever else its path names (a platform's
/// routes name the account too).
#[derive(Debug, Clone)]
pub struct PathId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::not_found("resource"))?;
        params
            .iter()
            .find(|(name, _)| *name == "id")
            .map(|(_, value)| PathId(value.to_string()))
            .ok_or_else(|| ApiError::not_found("resource"))
    }
}
