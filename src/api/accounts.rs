//! `/api/v1/accounts`: a platform onboards its customers. Platform keys
//! only; `{account}` is Dakghar's id or the platform's `external_id`.

use std::collections::HashMap;

use axum::{
    extract::{Query, State},
    http::StatusCode,
    Json,
};
use serde::{Deserialize, Serialize};

use super::{
    caller::{Caller, Platform},
    error::{ApiError, ApiResult},
    json_body::JsonBody,
};
use crate::{
    accounts::{platform, portal, team},
    clock::Timestamp,
    context::AppState,
    events,
    store::{Account, AccountRole},
};

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountIn {
    /// What people read; unique per installation. No control characters,
    /// and something besides spaces (kept trimmed).
    #[schema(
        max_length = 200,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\u0000-\u001f\u007f-\u009f]*$",
        example = "Customer 42"
    )]
    name: String,
    /// The platform's own id for the customer; unique per installation.
    /// Printable ASCII without spaces or `/`, not starting `acc_` (the
    /// start of Dakghar's own account ids).
    #[schema(
        min_length = 1,
        max_length = 255,
        pattern = r"^([!-.0-`b-~][!-.0-~]*|a([!-.0-bd-~][!-.0-~]*)?|ac([!-.0-bd-~][!-.0-~]*)?|acc([!-.0-^`-~][!-.0-~]*)?)$",
        example = "cus_42"
    )]
    external_id: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountPatchIn {
    #[schema(
        max_length = 200,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    name: Option<String>,
    /// null clears it; absent leaves it as it is.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 255, pattern = r"^([!-.0-`b-~][!-.0-~]*|a([!-.0-bd-~][!-.0-~]*)?|ac([!-.0-bd-~][!-.0-~]*)?|acc([!-.0-^`-~][!-.0-~]*)?)$")]
    external_id: Option<Option<String>>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct AccountOut {
    id: String,
    name: String,
    external_id: Option<String>,
    created_at: String,
}

impl From<Account> for AccountOut {
    fn from(a: Account) -> Self {
        AccountOut {
            id: a.id,
            name: a.name,
            external_id: a.external_id,
            created_at: Timestamp(a.created_at).to_rfc3339(),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct AccountListOut {
    data: Vec<AccountOut>,
    /// Pass as `cursor` for the next page; null on the last page.
    next_cursor: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DeletedCountsOut {
    events: u64,
    deliveries: u64,
    attempts: u64,
    endpoints: u64,
    users: u64,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct AccountDeletedOut {
    id: String,
    deleted: DeletedCountsOut,
}

#[utoipa::path(post, path = "/api/v1/accounts", tag = "accounts",
    summary = "Onboard a customer: a new account",
    request_body = AccountIn,
    responses((status = 201, body = AccountOut), (status = 400, body = super::error::ErrorOut),
        (status = 403, body = super::error::ErrorOut), (status = 409, description = "The name or external_id is taken", body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn create(
    State(state): State<AppState>,
    _platform: Platform,
    JsonBody(input): JsonBody<AccountIn>,
) -> ApiResult<(StatusCode, Json<AccountOut>)> {
    let ctx = &state.ctx;
    let account = platform::create_account(
        &ctx.store,
        &input.name,
        input.external_id.as_deref(),
        ctx.clock.now(),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(account.into())))
}

#[utoipa::path(get, path = "/api/v1/accounts", tag = "accounts",
    summary = "List accounts, oldest first",
    params(("cursor" = Option<String>, Query, description = "`next_cursor` of the page before", pattern = r"^[+-]?0*[0-9]{1,18}\..*$"),
        ("limit" = Option<i64>, Query, description = "1 to 100, default 25", minimum = 1, maximum = 100)),
    responses((status = 200, body = AccountListOut), (status = 400, body = super::error::ErrorOut), (status = 403, body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn list(
    State(state): State<AppState>,
    _platform: Platform,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<AccountListOut>> {
    let bad = |code, m: &str| ApiError::bad_request(code, m);
    let limit = match q.get("limit") {
        Some(l) => l
            .parse::<i64>()
            .ok()
            .filter(|l| (1..=platform::MAX_PAGE).contains(l))
            .ok_or_else(|| bad("invalid_query", "limit must be between 1 and 100"))?,
        None => 25,
    };
    let after = q
        .get("cursor")
        .map(|c| {
            events::parse_cursor(c)
                .ok_or_else(|| bad("invalid_cursor", "cursor is not one this API returned"))
        })
        .transpose()?;
    let (page, next) = platform::accounts(&state.ctx.store, after.as_ref(), limit).await?;
    Ok(Json(AccountListOut {
        data: page.into_iter().map(AccountOut::from).collect(),
        next_cursor: next.as_ref().map(events::cursor),
    }))
}

#[utoipa::path(get, path = "/api/v1/accounts/{account}", tag = "accounts",
    summary = "One account, by id or external_id",
    params(("account" = String, Path, description = "The account's id or external_id")),
    responses((status = 200, body = AccountOut), (status = 404, body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn get_one(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<AccountOut>> {
    let account = state.ctx.store.account(&caller.account_id).await?;
    Ok(Json(account.into()))
}

#[utoipa::path(patch, path = "/api/v1/accounts/{account}", tag = "accounts",
    summary = "Rename an account or change its external_id",
    params(("account" = String, Path, description = "The account's id or external_id")),
    request_body = AccountPatchIn,
    responses((status = 200, body = AccountOut), (status = 400, body = super::error::ErrorOut),
        (status = 404, body = super::error::ErrorOut), (status = 409, body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn patch(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(input): JsonBody<AccountPatchIn>,
) -> ApiResult<Json<AccountOut>> {
    let account = platform::update_account(
        &state.ctx.store,
        &caller.account_id,
        input.name.as_deref(),
        input.external_id.as_ref().map(|e| e.as_deref()),
    )
    .await?;
    Ok(Json(account.into()))
}

#[utoipa::path(delete, path = "/api/v1/accounts/{account}", tag = "accounts",
    summary = "Delete an account and all of its data; says how much went",
    params(("account" = String, Path, description = "The account's id or external_id")),
    responses((status = 200, body = AccountDeletedOut), (status = 404, body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<AccountDeletedOut>> {
    let gone = platform::delete_account(&state.ctx.store, &caller.account_id).await?;
    Ok(Json(AccountDeletedOut {
        id: caller.account_id,
        deleted: DeletedCountsOut {
            events: gone.events,
            deliveries: gone.deliveries,
            attempts: gone.attempts,
            endpoints: gone.endpoints,
            users: gone.users,
        },
    }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InviteIn {
    #[schema(
        max_length = 254,
        pattern = r"^[\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*[^@\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+@[^\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+[\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$",
        example = "dev@customer.example"
    )]
    email: String,
    #[schema(value_type = RoleIn)]
    role: String,
}

/// What a member may do (see the README's roles).
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // a schema only: the value arrives as text and is checked
enum RoleIn {
    Owner,
    Developer,
    Viewer,
}

/// What a portal session may do.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // a schema only, as `RoleIn`
enum PortalRoleIn {
    Developer,
    Viewer,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct InvitationOut {
    email: String,
    role: String,
    expires_at: String,
    /// The single-use link to set a password, only when no email carries
    /// it (no SMTP configured): with SMTP, only the invitee sees it.
    url: Option<String>,
    /// Whether an email with the link is on its way (SMTP is configured).
    emailed: bool,
}

fn role(raw: &str) -> ApiResult<AccountRole> {
    AccountRole::parse(raw).ok_or_else(|| {
        ApiError::bad_request("invalid_role", "role must be owner, developer or viewer")
    })
}

#[utoipa::path(post, path = "/api/v1/accounts/{account}/users", tag = "accounts",
    summary = "Invite a member by email: a single-use link, 72 h, to set a password",
    params(("account" = String, Path, description = "The account's id or external_id")),
    request_body = InviteIn,
    responses((status = 201, body = InvitationOut), (status = 400, body = super::error::ErrorOut),
        (status = 404, body = super::error::ErrorOut), (status = 409, description = "The email has an account already", body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn invite(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(input): JsonBody<InviteIn>,
) -> ApiResult<(StatusCode, Json<InvitationOut>)> {
    let role = role(&input.role)?;
    let invited = team::invite(
        &state.ctx,
        &caller.account_id,
        &input.email,
        role,
        &caller.actor(),
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(InvitationOut {
            emailed: invited.emailed(),
            email: invited.email,
            role: invited.role.to_string(),
            expires_at: Timestamp(invited.expires_at).to_rfc3339(),
            url: invited.link,
        }),
    ))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PortalSessionIn {
    /// `developer` (the default) or `viewer`.
    #[schema(value_type = Option<PortalRoleIn>)]
    role: Option<String>,
    /// How long the link and the session it opens last, e.g. "1h" (the
    /// default); 1 minute to 7 days.
    ttl: Option<String>,
    /// An http(s) URL the header's "Back to …" link leads to.
    return_url: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct PortalSessionOut {
    /// Open once, in the customer's browser (or an iframe).
    url: String,
    expires_at: String,
}

#[utoipa::path(post, path = "/api/v1/accounts/{account}/portal-sessions", tag = "accounts",
    summary = "A single-use link that opens this customer's dashboard",
    params(("account" = String, Path, description = "The account's id or external_id")),
    request_body = Option<PortalSessionIn>,
    responses((status = 201, body = PortalSessionOut), (status = 400, body = super::error::ErrorOut), (status = 404, body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn portal_session(
    State(state): State<AppState>,
    caller: Caller,
    raw: axum::body::Bytes,
) -> ApiResult<(StatusCode, Json<PortalSessionOut>)> {
    // Every field has a default, so an empty body asks for them all.
    let input: PortalSessionIn = super::json_body::optional(&raw)?.unwrap_or_default();
    let role = match input.role.as_deref() {
        Some(r) => role(r)?,
        None => AccountRole::Developer,
    };
    let ttl = match input.ttl.as_deref() {
        Some(t) => humantime::parse_duration(t.trim()).map_err(|_| {
            ApiError::bad_request("invalid_ttl", "ttl must be a duration such as 15m or 1h")
        })?,
        None => portal::DEFAULT_TTL,
    };
    let link = portal::create_link(
        &state.ctx,
        &caller.account_id,
        role,
        ttl,
        input.return_url.as_deref(),
        &caller.actor(),
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(PortalSessionOut {
            url: link.url,
            expires_at: link.expires_at.to_rfc3339(),
        }),
    ))
}
