//! `/api/v1/endpoints`: the customer's receivers.

use axum::{extract::State, http::StatusCode, Json};
use serde::{Deserialize, Serialize};

use super::{
    caller::{Caller, PathId},
    error::{ApiError, ApiResult},
};
use crate::{
    clock::Timestamp,
    context::AppState,
    endpoints::{self, EndpointChange, EndpointInput},
    store::Endpoint,
};

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointIn {
    url: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    event_types: Vec<String>,
    rate_limit_per_sec: Option<i64>,
    max_in_flight: Option<i64>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointPatchIn {
    url: Option<String>,
    description: Option<String>,
    event_types: Option<Vec<String>>,
    /// null removes the limit; absent leaves it as it is.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    rate_limit_per_sec: Option<Option<i64>>,
    max_in_flight: Option<i64>,
}

/// `"rate_limit_per_sec": null` clears the limit; leaving it out keeps it.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<i64>>, D::Error> {
    Option::<i64>::deserialize(d).map(Some)
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EndpointOut {
    id: String,
    url: String,
    description: String,
    event_types: Vec<String>,
    state: String,
    pause_reason: Option<String>,
    rate_limit_per_sec: Option<i64>,
    max_in_flight: i64,
    circuit_state: String,
    failing_since: Option<String>,
    created_at: String,
    /// Only when created or rotated: the signing secret, `whsec_…`.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct EndpointListOut {
    data: Vec<EndpointOut>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct HourOut {
    hour: String,
    delivered: i64,
    failed: i64,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct HealthOut {
    id: String,
    state: String,
    pause_reason: Option<String>,
    circuit_state: String,
    failing_since: Option<String>,
    last_success_at: Option<String>,
    attempts_24h: i64,
    /// Delivered share of the attempts, 0 to 1; null without attempts.
    success_rate_24h: Option<f64>,
    attempts_7d: i64,
    success_rate_7d: Option<f64>,
    avg_latency_ms_24h: Option<i64>,
    p95_latency_ms_24h: Option<i64>,
    pending: i64,
    in_flight: i64,
    /// The last 24 hours, oldest first.
    hourly: Vec<HourOut>,
}

impl EndpointOut {
    fn from(e: Endpoint, with_secret: bool) -> Self {
        EndpointOut {
            event_types: e.event_type_filter(),
            secret: with_secret.then_some(e.secret),
            id: e.id,
            url: e.url,
            description: e.description,
            state: e.state.as_str().to_string(),
            pause_reason: e.pause_reason,
            rate_limit_per_sec: e.rate_limit_per_sec,
            max_in_flight: e.max_in_flight,
            circuit_state: e.circuit_state.as_str().to_string(),
            failing_since: e.failing_since.map(|t| Timestamp(t).to_rfc3339()),
            created_at: Timestamp(e.created_at).to_rfc3339(),
        }
    }
}

#[utoipa::path(post, path = "/endpoints", tag = "endpoints", summary = "Add an endpoint; the answer carries its signing secret",
    request_body = EndpointIn, responses((status = 201, body = EndpointOut), (status = 400, body = super::error::ErrorOut)), security(("api_key" = [])))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Json<EndpointIn>, axum::extract::rejection::JsonRejection>,
) -> ApiResult<(StatusCode, Json<EndpointOut>)> {
    let Json(input) = body.map_err(|e| ApiError::bad_request("invalid_body", e.body_text()))?;
    let input = EndpointInput {
        url: input.url,
        description: input.description,
        event_types: input.event_types,
        rate_limit_per_sec: input.rate_limit_per_sec,
        max_in_flight: input.max_in_flight,
    };
    let created = endpoints::create(&state.ctx, &caller.account_id, input).await?;
    Ok((StatusCode::CREATED, Json(EndpointOut::from(created, true))))
}

#[utoipa::path(get, path = "/endpoints", tag = "endpoints", summary = "List endpoints",
    responses((status = 200, body = EndpointListOut)), security(("api_key" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<EndpointListOut>> {
    let data = endpoints::list(&state.ctx, &caller.account_id)
        .await?
        .into_iter()
        .map(|e| EndpointOut::from(e, false))
        .collect();
    Ok(Json(EndpointListOut { data }))
}

#[utoipa::path(get, path = "/endpoints/{id}", tag = "endpoints", summary = "One endpoint",
    params(("id" = String, Path)), responses((status = 200, body = EndpointOut), (status = 404, body = super::error::ErrorOut)), security(("api_key" = [])))]
pub async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<EndpointOut>> {
    let e = endpoints::get(&state.ctx, &caller.account_id, &id).await?;
    Ok(Json(EndpointOut::from(e, false)))
}

#[utoipa::path(patch, path = "/endpoints/{id}", tag = "endpoints", summary = "Change an endpoint",
    params(("id" = String, Path)), request_body = EndpointPatchIn,
    responses((status = 200, body = EndpointOut), (status = 400, body = super::error::ErrorOut), (status = 404, body = super::error::ErrorOut)), security(("api_key" = [])))]
pub async fn patch(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
    body: Result<Json<EndpointPatchIn>, axum::extract::rejection::JsonRejection>,
) -> ApiResult<Json<EndpointOut>> {
    let Json(input) = body.map_err(|e| ApiError::bad_request("invalid_body", e.body_text()))?;
    let change = EndpointChange {
        url: input.url,
        description: input.description,
        event_types: input.event_types,
        rate_limit_per_sec: input.rate_limit_per_sec,
        max_in_flight: input.max_in_flight,
    };
    let e = endpoints::update(&state.ctx, &caller.account_id, &id, change).await?;
    Ok(Json(EndpointOut::from(e, false)))
}

#[utoipa::path(delete, path = "/endpoints/{id}", tag = "endpoints", summary = "Delete an endpoint and its deliveries",
    params(("id" = String, Path)), responses((status = 204), (status = 404, body = super::error::ErrorOut)), security(("api_key" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<StatusCode> {
    endpoints::delete(&state.ctx, &caller.account_id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/endpoints/{id}/pause", tag = "endpoints", summary = "Pause: events keep queueing",
    params(("id" = String, Path)), responses((status = 200, body = EndpointOut), (status = 404, body = super::error::ErrorOut)), security(("api_key" = [])))]
pub async fn pause(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<EndpointOut>> {
    let e = endpoints::pause(&state.ctx, &caller.account_id, &id).await?;
    Ok(Json(EndpointOut::from(e, false)))
}

#[utoipa::path(post, path = "/endpoints/{id}/resume", tag = "endpoints", summary = "Resume: the queue drains",
    params(("id" = String, Path)), responses((status = 200, body = EndpointOut), (status = 404, body = super::error::ErrorOut)), security(("api_key" = [])))]
pub async fn resume(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<EndpointOut>> {
    let e = endpoints::resume(&state.ctx, &caller.account_id, &id).await?;
    Ok(Json(EndpointOut::from(e, false)))
}

#[utoipa::path(post, path = "/endpoints/{id}/rotate-secret", tag = "endpoints", summary = "New signing secret; the old one signs alongside for 24 h",
    params(("id" = String, Path)), responses((status = 200, body = EndpointOut), (status = 404, body = super::error::ErrorOut)), security(("api_key" = [])))]
pub async fn rotate_secret(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<EndpointOut>> {
    let e = endpoints::rotate_secret(&state.ctx, &caller.account_id, &id).await?;
    Ok(Json(EndpointOut::from(e, true)))
}

/// Success rates, latency, attempts per hour and the queue (SPEC §9): the
/// numbers the dashboard's endpoint page shows.
#[utoipa::path(get, path = "/endpoints/{id}/health", tag = "endpoints", summary = "Success rates, latency, attempts per hour and the queue",
    params(("id" = String, Path)), responses((status = 200, body = HealthOut), (status = 404, body = super::error::ErrorOut)), security(("api_key" = [])))]
pub async fn health(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<HealthOut>> {
    let (e, h) = endpoints::health(&state.ctx, &caller.account_id, &id).await?;
    let rate = |ok: i64, all: i64| (all > 0).then(|| ok as f64 / all as f64);
    let at = |t: Option<i64>| t.map(|t| Timestamp(t).to_rfc3339());
    Ok(Json(HealthOut {
        state: e.state.as_str().to_string(),
        pause_reason: e.pause_reason,
        circuit_state: e.circuit_state.as_str().to_string(),
        failing_since: at(e.failing_since),
        last_success_at: at(e.last_success_at),
        attempts_24h: h.day.attempts,
        success_rate_24h: rate(h.day.delivered, h.day.attempts),
        attempts_7d: h.week.attempts,
        success_rate_7d: rate(h.week.delivered, h.week.attempts),
        avg_latency_ms_24h: h.day.avg_ms,
        p95_latency_ms_24h: h.p95_ms_day,
        pending: h.pending,
        in_flight: h.in_flight,
        hourly: h
            .hourly
            .iter()
            .map(|(start, delivered, failed)| HourOut {
                hour: Timestamp(*start).to_rfc3339(),
                delivered: *delivered,
                failed: *failed,
            })
            .collect(),
        id: e.id,
    }))
}
