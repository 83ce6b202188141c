//! `/api/v1/endpoints`: the customer's receivers.

use axum::{extract::State, http::StatusCode, Json};
use serde::{Deserialize, Serialize};

use super::{
    caller::{Caller, PathId},
    error::{ApiError, ApiResult},
    json_body::{integral, JsonBody},
};
use crate::{
    clock::Timestamp,
    context::{AppState, Ctx},
    endpoints::{self, EndpointChange, EndpointInput},
    store::Endpoint,
};

/// Starts per second, or `"unlimited"`.
/// How waits grow between retries.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // a schema only: the value arrives as text and is checked
enum RetryStrategyIn {
    Exponential,
    Linear,
    Fixed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum RateLimit {
    PerSecond(i64),
    Word(Unlimited),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Unlimited {
    Unlimited,
}

impl RateLimit {
    /// As stored: `UNLIMITED` (0) for none, which a number must not
    /// mean by accident.
    fn stored(self) -> ApiResult<i64> {
        match self {
            RateLimit::PerSecond(n) if n == endpoints::UNLIMITED => Err(ApiError::bad_request(
                "invalid_rate_limit",
                format!(
                    "rate_limit_per_sec must be between 1 and {}, or \"unlimited\"",
                    endpoints::MAX_RATE_LIMIT
                ),
            )),
            RateLimit::PerSecond(n) => Ok(n),
            RateLimit::Word(Unlimited::Unlimited) => Ok(endpoints::UNLIMITED),
        }
    }

    fn from_stored(n: i64) -> RateLimit {
        if n == endpoints::UNLIMITED {
            RateLimit::Word(Unlimited::Unlimited)
        } else {
            RateLimit::PerSecond(n)
        }
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointIn {
    /// An http or https URL with a host and no user name or password; its
    /// host must not be an internal address (the SSRF guard) or look like
    /// another name, which no schema can say.
    #[schema(
        min_length = 1,
        max_length = 2048,
        example = "https://hooks.example.com/in"
    )]
    url: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    #[schema(value_type = super::schemas::EventTypeFilter)]
    event_types: Vec<String>,
    /// Starts per second, or `"unlimited"`; absent or null: the
    /// installation's default (`--default-rate-limit`).
    #[schema(value_type = Option<super::schemas::RateLimitSchema>)]
    rate_limit_per_sec: Option<RateLimit>,
    #[serde(default, deserialize_with = "integral")]
    #[schema(minimum = 1, maximum = 1000)]
    max_in_flight: Option<i64>,
    /// `exponential`, `linear` or `fixed`; absent: the installation's.
    #[schema(value_type = Option<RetryStrategyIn>)]
    retry_strategy: Option<String>,
    /// The statuses to retry, codes, ranges and classes (`408,429,5xx`);
    /// any other non-2xx fails at once. Absent: the installation's.
    retry_statuses: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointPatchIn {
    #[schema(
        min_length = 1,
        max_length = 2048,
        example = "https://hooks.example.com/in"
    )]
    url: Option<String>,
    description: Option<String>,
    #[schema(value_type = Option<super::schemas::EventTypeFilter>)]
    event_types: Option<Vec<String>>,
    /// A number, `"unlimited"`, or null for the installation's default;
    /// absent leaves it as it is.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<super::schemas::RateLimitSchema>)]
    rate_limit_per_sec: Option<Option<RateLimit>>,
    #[serde(default, deserialize_with = "integral")]
    #[schema(minimum = 1, maximum = 1000)]
    max_in_flight: Option<i64>,
    /// null follows the installation's policy again; absent leaves it.
    #[serde(default, deserialize_with = "present_text")]
    #[schema(value_type = Option<RetryStrategyIn>)]
    retry_strategy: Option<Option<String>>,
    #[serde(default, deserialize_with = "present_text")]
    #[schema(value_type = Option<String>)]
    retry_statuses: Option<Option<String>>,
}

fn present_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// `"rate_limit_per_sec": null` goes back to the default; leaving it out keeps it.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<RateLimit>>, D::Error> {
    Option::<RateLimit>::deserialize(d).map(Some)
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EndpointOut {
    id: String,
    url: String,
    description: String,
    event_types: Vec<String>,
    state: String,
    pause_reason: Option<String>,
    /// The endpoint's own limit: a number, `"unlimited"`, or null when the
    /// installation's default applies.
    rate_limit_per_sec: Option<RateLimit>,
    /// The limit in force: starts per second, null for none.
    effective_rate_limit_per_sec: Option<i64>,
    /// The endpoint's own retry policy; null follows the installation's.
    retry_strategy: Option<String>,
    retry_statuses: Option<String>,
    /// The retry policy in force.
    effective_retry_strategy: String,
    effective_retry_statuses: String,
    max_in_flight: i64,
    /// How many attempts may be in flight now: `max_in_flight`, lowered
    /// while the receiver shows overload (429, 503, timeouts) and grown
    /// back by one after a run of successes (a half-open circuit lets one
    /// trial through whatever this says).
    in_flight_cap: i64,
    circuit_state: String,
    failing_since: Option<String>,
    /// Set while a 429 or 503 holds all of the endpoint's deliveries.
    throttled_until: Option<String>,
    /// The status that asked for the throttle.
    throttle_status: Option<i64>,
    /// The throttle in words: "throttled until T (receiver asked, 429)".
    throttle: Option<String>,
    /// A fault on Dakghar's side (not the receiver's) that keeps this
    /// endpoint's deliveries from being sent; they wait and try again with
    /// backoff. Cleared by the next attempt that is made.
    fault: Option<String>,
    fault_since: Option<String>,
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
    fn from(e: Endpoint, with_secret: bool, ctx: &Ctx) -> Self {
        let now = ctx.clock.now();
        let throttle = e.throttle_at(now.millis());
        EndpointOut {
            effective_rate_limit_per_sec: endpoints::rate_limit(
                &e,
                ctx.engine.settings().default_rate_limit,
            ),
            effective_retry_strategy: e
                .retry_strategy
                .clone()
                .unwrap_or_else(|| ctx.engine.settings().backoff.strategy.as_str().to_string()),
            effective_retry_statuses: e
                .retry_statuses
                .clone()
                .unwrap_or_else(|| ctx.engine.settings().retry_statuses.to_string()),
            retry_strategy: e.retry_strategy.clone(),
            retry_statuses: e.retry_statuses.clone(),
            in_flight_cap: e.adaptive_in_flight(),
            throttled_until: throttle.map(|(until, _)| Timestamp(until).to_rfc3339()),
            throttle_status: throttle.and_then(|(_, status)| status),
            throttle: endpoints::throttle_note(&e, now),
            fault_since: e.fault_at.map(|t| Timestamp(t).to_rfc3339()),
            fault: e.fault.clone(),
            event_types: e.event_type_filter(),
            secret: with_secret.then_some(e.secret),
            id: e.id,
            url: e.url,
            description: e.description,
            state: e.state.as_str().to_string(),
            pause_reason: e.pause_reason,
            rate_limit_per_sec: e.rate_limit_per_sec.map(RateLimit::from_stored),
            max_in_flight: e.max_in_flight,
            circuit_state: e.circuit_state.as_str().to_string(),
            failing_since: e.failing_since.map(|t| Timestamp(t).to_rfc3339()),
            created_at: Timestamp(e.created_at).to_rfc3339(),
        }
    }
}

#[utoipa::path(post, path = "/endpoints", tag = "endpoints", summary = "Add an endpoint; the answer carries its signing secret",
    request_body = EndpointIn, responses((status = 201, body = EndpointOut), (status = 400, body = super::error::ErrorOut),
        (status = 409, description = "`endpoint_limit`: the account has as many endpoints as it may (--max-endpoints-per-account)", body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(input): JsonBody<EndpointIn>,
) -> ApiResult<(StatusCode, Json<EndpointOut>)> {
    let input = EndpointInput {
        url: input.url,
        description: input.description,
        event_types: input.event_types,
        rate_limit_per_sec: input
            .rate_limit_per_sec
            .map(RateLimit::stored)
            .transpose()?,
        max_in_flight: input.max_in_flight,
        retry_strategy: input.retry_strategy,
        retry_statuses: input.retry_statuses,
    };
    let created = endpoints::create(&state.ctx, &caller.account_id, input).await?;
    Ok((
        StatusCode::CREATED,
        Json(EndpointOut::from(created, true, &state.ctx)),
    ))
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
        .map(|e| EndpointOut::from(e, false, &state.ctx))
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
    Ok(Json(EndpointOut::from(e, false, &state.ctx)))
}

#[utoipa::path(patch, path = "/endpoints/{id}", tag = "endpoints", summary = "Change an endpoint",
    params(("id" = String, Path)), request_body = EndpointPatchIn,
    responses((status = 200, body = EndpointOut), (status = 400, body = super::error::ErrorOut), (status = 404, body = super::error::ErrorOut)), security(("api_key" = [])))]
pub async fn patch(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
    JsonBody(input): JsonBody<EndpointPatchIn>,
) -> ApiResult<Json<EndpointOut>> {
    let change = EndpointChange {
        url: input.url,
        description: input.description,
        event_types: input.event_types,
        rate_limit_per_sec: input
            .rate_limit_per_sec
            .map(|r| r.map(RateLimit::stored).transpose())
            .transpose()?,
        max_in_flight: input.max_in_flight,
        retry_strategy: input.retry_strategy,
        retry_statuses: input.retry_statuses,
    };
    let e = endpoints::update(&state.ctx, &caller.account_id, &id, change).await?;
    Ok(Json(EndpointOut::from(e, false, &state.ctx)))
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
    Ok(Json(EndpointOut::from(e, false, &state.ctx)))
}

/// The endpoint as it now is, and what its resume found.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ResumeOut {
    #[serde(flatten)]
    endpoint: EndpointOut,
    /// Deliveries that drain now.
    waiting: i64,
    /// Deliveries whose retry window passed while paused: expired, not sent.
    past_window: i64,
}

#[utoipa::path(post, path = "/endpoints/{id}/resume", tag = "endpoints", summary = "Resume: the queue drains; says how many wait and how many passed their window while paused",
    params(("id" = String, Path)), responses((status = 200, body = ResumeOut), (status = 404, body = super::error::ErrorOut)), security(("api_key" = [])))]
pub async fn resume(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<ResumeOut>> {
    let r = endpoints::resume(&state.ctx, &caller.account_id, &id).await?;
    Ok(Json(ResumeOut {
        endpoint: EndpointOut::from(r.endpoint, false, &state.ctx),
        waiting: r.waiting,
        past_window: r.past_window,
    }))
}

#[utoipa::path(post, path = "/endpoints/{id}/rotate-secret", tag = "endpoints", summary = "New signing secret; the old one signs alongside for 24 h",
    params(("id" = String, Path)), responses((status = 200, body = EndpointOut), (status = 404, body = super::error::ErrorOut)), security(("api_key" = [])))]
pub async fn rotate_secret(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<EndpointOut>> {
    let e = endpoints::rotate_secret(&state.ctx, &caller.account_id, &id).await?;
    Ok(Json(EndpointOut::from(e, true, &state.ctx)))
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

#[derive(Serialize, utoipa::ToSchema)]
pub struct QueueOut {
    /// Deliveries waiting for this endpoint.
    pending: i64,
}

#[utoipa::path(get, path = "/endpoints/{id}/queue", tag = "endpoints", summary = "How many deliveries wait for the endpoint (the discard preview)",
    params(("id" = String, Path)), responses((status = 200, body = QueueOut), (status = 404, body = super::error::ErrorOut)), security(("api_key" = [])))]
pub async fn queue(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<QueueOut>> {
    let pending = endpoints::queued(&state.ctx, &caller.account_id, &id).await?;
    Ok(Json(QueueOut { pending }))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscardIn {
    /// The count the preview showed; if the queue holds another number
    /// now, nothing is discarded (409 queue_changed).
    #[serde(default, deserialize_with = "integral")]
    expected: Option<i64>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DiscardOut {
    discarded: i64,
}

#[utoipa::path(post, path = "/endpoints/{id}/queue/discard", tag = "endpoints",
    summary = "Discard a paused endpoint's queued deliveries (they expire, and can still be resent or replayed)",
    params(("id" = String, Path)), request_body = Option<DiscardIn>,
    responses((status = 200, body = DiscardOut), (status = 404, body = super::error::ErrorOut),
        (status = 409, description = "The endpoint is not paused, or the queue changed since the preview (`queue_changed`)", body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn discard_queue(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
    body: axum::body::Bytes,
) -> ApiResult<Json<DiscardOut>> {
    // The body is optional: none, or `{expected}` as JSON.
    let expected = super::json_body::optional::<DiscardIn>(&body)?.and_then(|b| b.expected);
    let discarded = endpoints::discard_queue(&state.ctx, &caller.account_id, &id, expected).await?;
    Ok(Json(DiscardOut { discarded }))
}
