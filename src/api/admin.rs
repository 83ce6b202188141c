//! `/api/v1/admin/*`: bulk replay and its audit log. Reached with an admin
//! API key or an admin's session; anyone else gets 403 (401 if anonymous).

use app::model::Viewer;
use axum::{
    extract::{FromRequestParts, State},
    http::{request::Parts, Method, StatusCode},
    response::IntoResponse,
    Json,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    caller::{key_holder, PathId},
    error::{ApiError, ApiResult},
    events::parse_time,
};
use crate::{
    accounts::KeyHolder,
    clock::Timestamp,
    context::AppState,
    replay,
    store::{Replay, ReplayCriteria, ReplayProgress},
};

/// An administrator, and how the audit log names them.
#[derive(Debug, Clone)]
pub struct Admin {
    pub actor: String,
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if parts
            .headers
            .contains_key(axum::http::header::AUTHORIZATION)
        {
            return match key_holder(parts, state).await? {
                KeyHolder::Account(k) if k.is_admin => Ok(Admin {
                    actor: format!("api_key:{}", k.id),
                }),
                _ => Err(ApiError::forbidden("this needs an admin API key")),
            };
        }
        let Some(viewer) = parts.extensions.get::<Viewer>().cloned() else {
            return Err(ApiError::unauthorized(
                "missing Authorization: Bearer <admin api key>",
            ));
        };
        if !viewer.is_admin || viewer.portal {
            return Err(ApiError::forbidden("only administrators may do this"));
        }
        // A session rides along on any request the browser makes, so
        // changes must come from our own pages.
        if parts.method != Method::GET && app::port::is_cross_site(&parts.headers) {
            return Err(ApiError::forbidden("cross-site request refused"));
        }
        Ok(Admin {
            actor: viewer.actor,
        })
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct CriteriaIn {
    /// Any of `failed`, `expired` and `pending` (waiting deliveries get a
    /// fresh retry window: a paused backlog that would otherwise expire).
    #[schema(value_type = Vec<ReplayStateIn>)]
    states: Vec<String>,
    /// Deliveries created at or after this RFC 3339 time.
    since: Option<String>,
    until: Option<String>,
    account_id: Option<String>,
    endpoint_id: Option<String>,
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    event_type: Option<String>,
}

/// A state a replay takes deliveries from.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // a schema only: the value arrives as text and is checked
enum ReplayStateIn {
    Failed,
    Expired,
    Pending,
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct ReplayIn {
    criteria: CriteriaIn,
    #[serde(default)]
    dry_run: bool,
    /// How long to spread the redeliveries over, e.g. "5m" (the default).
    window: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct PreviewGroupOut {
    account_id: String,
    account_name: String,
    endpoint_id: String,
    endpoint_url: String,
    count: i64,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct PreviewOut {
    dry_run: bool,
    total: i64,
    groups: Vec<PreviewGroupOut>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ProgressOut {
    pending: i64,
    in_flight: i64,
    delivered: i64,
    failed: i64,
    expired: i64,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ReplayOut {
    id: String,
    /// `single` (a resend) or `bulk`.
    kind: String,
    actor: String,
    account_id: Option<String>,
    #[schema(value_type = Object)]
    criteria: Value,
    count: i64,
    /// `running`, `cancelled`, or `done` for a resend.
    status: String,
    window_ms: Option<i64>,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<ProgressOut>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ReplayListOut {
    data: Vec<ReplayOut>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct CancelOut {
    id: String,
    status: String,
    returned_to_dead_letter: u64,
}

fn criteria(c: CriteriaIn) -> ApiResult<ReplayCriteria> {
    let bad = |m: String| ApiError::bad_request("invalid_criteria", m);
    let mut out = ReplayCriteria::default();
    for s in &c.states {
        match s.as_str() {
            "failed" => out.failed = true,
            "expired" => out.expired = true,
            "pending" => out.pending = true,
            other => {
                return Err(bad(format!(
                    "only failed, expired and pending deliveries can be replayed, not {other:?}"
                )))
            }
        }
    }
    let blank = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    out.since = blank(c.since)
        .map(|v| parse_time("since", &v).map(Timestamp::millis))
        .transpose()?;
    out.until = blank(c.until)
        .map(|v| parse_time("until", &v).map(Timestamp::millis))
        .transpose()?;
    out.account_id = blank(c.account_id);
    out.endpoint_id = blank(c.endpoint_id);
    out.event_type = blank(c.event_type);
    Ok(out)
}

#[utoipa::path(post, path = "/api/v1/admin/replays", tag = "admin",
    summary = "Preview (dry_run) or start a bulk replay of dead letters",
    request_body = ReplayIn,
    responses(
        (status = 200, description = "dry_run: what would be replayed", body = PreviewOut),
        (status = 202, description = "Started", body = ReplayOut),
        (status = 400, body = super::error::ErrorOut), (status = 403, body = super::error::ErrorOut),
    ),
    security(("api_key" = [])))]
pub async fn create(
    State(state): State<AppState>,
    admin: Admin,
    super::json_body::JsonBody(input): super::json_body::JsonBody<ReplayIn>,
) -> ApiResult<axum::response::Response> {
    let window = match input.window.as_deref() {
        Some(w) => humantime::parse_duration(w).map_err(|_| {
            ApiError::bad_request(
                "invalid_window",
                "window must be a duration such as 5m or 1h",
            )
        })?,
        None => replay::DEFAULT_WINDOW,
    };
    let c = criteria(input.criteria)?;
    let ctx = &state.ctx;
    if input.dry_run {
        let groups = replay::preview(ctx, &c, window).await?;
        let total: i64 = groups.iter().map(|g| g.count).sum();
        let groups = groups
            .into_iter()
            .map(|g| PreviewGroupOut {
                account_id: g.account_id,
                account_name: g.account_name,
                endpoint_id: g.endpoint_id,
                endpoint_url: g.endpoint_url,
                count: g.count,
            })
            .collect();
        let preview = PreviewOut {
            dry_run: true,
            total,
            groups,
        };
        return Ok((StatusCode::OK, Json(preview)).into_response());
    }
    let started = replay::start(ctx, &c, &admin.actor, window).await?;
    Ok((StatusCode::ACCEPTED, Json(replay_out(&started, None))).into_response())
}

fn replay_out(r: &Replay, progress: Option<&ReplayProgress>) -> ReplayOut {
    ReplayOut {
        id: r.id.clone(),
        kind: r.kind.clone(),
        actor: r.actor.clone(),
        account_id: r.account_id.clone(),
        criteria: serde_json::from_str::<Value>(&r.criteria).unwrap_or(Value::Null),
        count: r.count,
        status: r.status.clone(),
        window_ms: r.window_ms,
        created_at: Timestamp(r.created_at).to_rfc3339(),
        progress: progress.map(|p| ProgressOut {
            pending: p.pending,
            in_flight: p.in_flight,
            delivered: p.delivered,
            failed: p.failed,
            expired: p.expired,
        }),
    }
}

/// The audit log: every resend and bulk replay, newest first.
#[utoipa::path(get, path = "/api/v1/admin/replays", tag = "admin",
    summary = "The audit log: every resend and bulk replay, newest first",
    responses((status = 200, body = ReplayListOut), (status = 403, body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn list(State(state): State<AppState>, _admin: Admin) -> ApiResult<Json<ReplayListOut>> {
    let rows = replay::audit_log(&state.ctx).await?;
    let data = rows.iter().map(|r| replay_out(r, None)).collect();
    Ok(Json(ReplayListOut { data }))
}

#[utoipa::path(get, path = "/api/v1/admin/replays/{id}", tag = "admin",
    summary = "A replay and where its deliveries are now",
    params(("id" = String, Path)),
    responses((status = 200, body = ReplayOut), (status = 404, body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn get_one(
    State(state): State<AppState>,
    _admin: Admin,
    PathId(id): PathId,
) -> ApiResult<Json<ReplayOut>> {
    let (r, progress) = replay::status(&state.ctx, &id).await?;
    Ok(Json(replay_out(&r, Some(&progress))))
}

#[utoipa::path(post, path = "/api/v1/admin/replays/{id}/cancel", tag = "admin",
    summary = "Return what a replay has not attempted yet to the dead-letter queue",
    params(("id" = String, Path)),
    responses((status = 200, body = CancelOut), (status = 404, body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn cancel(
    State(state): State<AppState>,
    admin: Admin,
    PathId(id): PathId,
) -> ApiResult<Json<CancelOut>> {
    let reverted = replay::cancel(&state.ctx, &id, &admin.actor).await?;
    Ok(Json(CancelOut {
        id,
        status: "cancelled".into(),
        returned_to_dead_letter: reverted,
    }))
}
