//! `/api/v1/events`: ingest (SPEC §3), listing and detail; and resend (§5).

use std::collections::HashMap;

use axum::{
    body::Body,
    extract::{Query, State},
    http::{HeaderMap, StatusCode},
    Json,
};
use serde::Serialize;
use serde_json::value::RawValue;

use super::{
    caller::{Caller, PathId, Producer},
    error::{ApiError, ApiResult},
    ingest_body::{read_event, too_large, EventIn, Incoming, MAX_PAYLOAD_BYTES},
};
use crate::{
    clock::Timestamp,
    context::AppState,
    events::{self, AttemptInfo, DeliveryInfo},
    replay,
    store::{Delivery, DeliveryState, EventFilter, NewEvent},
};

#[derive(Serialize, utoipa::ToSchema)]
pub struct IngestOut {
    id: String,
    deliveries: Vec<DeliveryRef>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct DeliveryRef {
    id: String,
    endpoint_id: String,
}

/// Over the limit is a 413; a body that broke off or was malformed on the
/// wire is the client's 400, not a size problem.
fn unreadable(e: axum::Error) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return too_large();
        }
        source = s.source();
    }
    bad(
        "unreadable_body",
        format!("the request body could not be read: {e}"),
    )
}

fn bad(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::bad_request(code, message)
}

/// The body is read by hand so every failure gets a JSON error and the
/// stored payload is byte for byte what the producer sent.
#[utoipa::path(post, path = "/events", tag = "events",
    summary = "Send an event: fanned out to every subscribed endpoint",
    params(("Idempotency-Key" = Option<String>, Header, description = "Used as the event id when the body has none",
        max_length = 255, pattern = r"^[!-~]([ -~]*[!-~])?$")),
    request_body = EventIn,
    responses(
        (status = 202, description = "Accepted (or the first result of the same id again)", body = IngestOut),
        (status = 400, body = super::error::ErrorOut), (status = 401, body = super::error::ErrorOut),
        (status = 409, description = "`idempotency_conflict`: the id was used for another type or payload", body = super::error::ErrorOut),
        (status = 413, body = super::error::ErrorOut), (status = 415, body = super::error::ErrorOut),
        (status = 429, description = "Over the account's events per second (--ingest-rate-limit); see Retry-After", body = super::error::ErrorOut),
    ),
    security(("api_key" = [])))]
pub async fn ingest(
    State(state): State<AppState>,
    Producer(caller): Producer,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<IngestOut>)> {
    // Room for the envelope around a payload at the limit.
    let body = axum::body::to_bytes(body, MAX_PAYLOAD_BYTES + 4096)
        .await
        .map_err(unreadable)?;
    let Incoming {
        id,
        event_type,
        payload,
    } = read_event(&headers, &body)?;
    let new = NewEvent {
        account_id: caller.account_id,
        id: id.clone(),
        event_type,
        payload,
    };
    let trace = headers.get("traceparent").and_then(|v| v.to_str().ok());
    let key = Some(caller.key_id.as_str());
    let ingested = events::ingest(&state.ctx, new, None, trace, key).await?;
    let out = IngestOut {
        id,
        deliveries: ingested
            .deliveries
            .into_iter()
            .map(|d| DeliveryRef {
                id: d.id,
                endpoint_id: d.endpoint_id,
            })
            .collect(),
    };
    Ok((StatusCode::ACCEPTED, Json(out)))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DeliveryOut {
    id: String,
    endpoint_id: String,
    state: String,
    attempts_count: i64,
    next_attempt_at: Option<String>,
    give_up_at: String,
    last_status: Option<i64>,
    last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempts: Option<Vec<AttemptOut>>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct AttemptOut {
    attempt: i64,
    started_at: String,
    duration_ms: i64,
    status: Option<i64>,
    classification: String,
    explanation: String,
    response_snippet: Option<String>,
    error: Option<String>,
}

fn delivery_out(d: Delivery, attempts: Option<Vec<AttemptInfo>>) -> DeliveryOut {
    DeliveryOut {
        next_attempt_at: d.next_attempt().map(|t| Timestamp(t).to_rfc3339()),
        give_up_at: Timestamp(d.give_up_at).to_rfc3339(),
        attempts: attempts.map(|a| a.into_iter().map(attempt_out).collect()),
        id: d.id,
        endpoint_id: d.endpoint_id,
        state: d.state.as_str().to_string(),
        attempts_count: d.attempt_seq,
        last_status: d.last_status,
        last_error: d.last_error,
    }
}

fn attempt_out(a: AttemptInfo) -> AttemptOut {
    AttemptOut {
        attempt: a.number,
        started_at: Timestamp(a.started_at).to_rfc3339(),
        duration_ms: a.duration_ms,
        status: a.status,
        classification: a.classification,
        explanation: a.explanation,
        response_snippet: a.response_snippet,
        error: a.error,
    }
}

pub(crate) fn parse_time(name: &str, raw: &str) -> ApiResult<Timestamp> {
    chrono::DateTime::parse_from_rfc3339(raw)
        .map(|t| Timestamp(t.timestamp_millis()))
        .map_err(|_| {
            bad(
                "invalid_query",
                format!("{name} must be an RFC 3339 time such as 2026-01-31T12:00:00Z"),
            )
        })
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct EventSummaryOut {
    id: String,
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    event_type: String,
    created_at: String,
    deliveries: Vec<DeliveryOut>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct EventListOut {
    data: Vec<EventSummaryOut>,
    /// Pass as `cursor` for the next page; null on the last page.
    next_cursor: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct EventDetailOut {
    id: String,
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    event_type: String,
    /// Exactly as sent: any JSON value.
    #[schema(value_type = serde_json::Value)]
    payload: Box<RawValue>,
    created_at: String,
    deliveries: Vec<DeliveryOut>,
}

#[utoipa::path(get, path = "/events", tag = "events",
    summary = "List events, newest first",
    params(
        ("state" = Option<String>, Query, description = "pending, in_flight, delivered, failed or expired",
            pattern = r"^(pending|in_flight|delivered|failed|expired)?$"),
        ("type" = Option<String>, Query), ("endpoint" = Option<String>, Query),
        ("status" = Option<String>, Query, description = "a delivery's last answer: a status (404), a class (4xx, 5xx) or timeout",
            pattern = r"^([Tt][Ii][Mm][Ee][Oo][Uu][Tt]|[1-5][Xx][Xx]|[1-5][0-9][0-9])?$"),
        ("since" = Option<String>, Query, description = "RFC 3339", format = DateTime),
        ("until" = Option<String>, Query, description = "RFC 3339", format = DateTime),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the page before", pattern = r"^([+-]?0*[0-9]{1,18}\..*)?$"),
        ("limit" = Option<i64>, Query, description = "1 to 100, default 25", minimum = 1, maximum = 100),
    ),
    responses((status = 200, body = EventListOut), (status = 400, body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<EventListOut>> {
    // Taken as sent, as the document describes them: an empty filter is
    // no filter; an empty number or time is a mistake.
    let get = |k: &str| q.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let given = |k: &str| q.get(k).map(String::as_str);
    let state_filter = match get("state") {
        Some(s) if DeliveryState::parse(s).is_none() => {
            return Err(bad(
                "invalid_query",
                "state must be one of pending, in_flight, delivered, failed, expired",
            ))
        }
        s => s.map(str::to_string),
    };
    let limit = match given("limit") {
        Some(l) => l
            .parse::<i64>()
            .ok()
            .filter(|l| (1..=100).contains(l))
            .ok_or_else(|| bad("invalid_query", "limit must be between 1 and 100"))?,
        None => 25,
    };
    let cursor = get("cursor")
        .map(|c| {
            events::parse_cursor(c)
                .ok_or_else(|| bad("invalid_cursor", "cursor is not one this API returned"))
        })
        .transpose()?;
    let filter = EventFilter {
        state: state_filter,
        event_type: get("type").map(str::to_string),
        endpoint_id: get("endpoint").map(str::to_string),
        since: given("since").map(|v| parse_time("since", v)).transpose()?,
        until: given("until").map(|v| parse_time("until", v)).transpose()?,
        after: cursor,
        before: None,
        id: None,
        answer: get("status")
            .map(|s| {
                if s.trim() == s {
                    events::parse_answer(s)
                } else {
                    Err(format!("status {s:?} has spaces around it"))
                }
            })
            .transpose()
            .map_err(|e| bad("invalid_query", e))?,
    };
    let page = events::list(&state.ctx, &caller.account_id, &filter, limit).await?;
    let data = page
        .events
        .into_iter()
        .map(|(e, ds)| EventSummaryOut {
            id: e.id,
            event_type: e.event_type,
            created_at: Timestamp(e.created_at).to_rfc3339(),
            deliveries: ds.into_iter().map(|d| delivery_out(d, None)).collect(),
        })
        .collect();
    Ok(Json(EventListOut {
        data,
        next_cursor: page.next.as_ref().map(events::cursor),
    }))
}

#[utoipa::path(get, path = "/events/{id}", tag = "events",
    summary = "One event with every delivery and its attempts",
    params(("id" = String, Path)),
    responses((status = 200, body = EventDetailOut), (status = 404, body = super::error::ErrorOut)),
    security(("api_key" = [])))]
pub async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<EventDetailOut>> {
    let detail = events::detail(&state.ctx, &caller.account_id, &id).await?;
    let event = detail.event;
    let payload: Box<RawValue> =
        RawValue::from_string(String::from_utf8_lossy(&event.payload).into_owned())
            .map_err(|_| ApiError::internal())?;
    Ok(Json(EventDetailOut {
        id: event.id,
        event_type: event.event_type,
        payload,
        created_at: Timestamp(event.created_at).to_rfc3339(),
        deliveries: detail
            .deliveries
            .into_iter()
            .map(|DeliveryInfo { delivery, attempts }| delivery_out(delivery, Some(attempts)))
            .collect(),
    }))
}

#[utoipa::path(post, path = "/deliveries/{id}/resend", tag = "events",
    summary = "Resend a finished delivery now, with a fresh retry window",
    params(("id" = String, Path)),
    responses(
        (status = 202, body = DeliveryOut), (status = 404, body = super::error::ErrorOut),
        (status = 409, description = "Still pending or in flight", body = super::error::ErrorOut),
        (status = 429, description = "Over the per-endpoint limit; see Retry-After", body = super::error::ErrorOut),
    ),
    security(("api_key" = [])))]
pub async fn resend(
    State(state): State<AppState>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<(StatusCode, Json<DeliveryOut>)> {
    let actor = format!("api_key:{}", caller.key_id);
    let updated = replay::resend(&state.ctx, &caller.account_id, &id, &actor).await?;
    Ok((StatusCode::ACCEPTED, Json(delivery_out(updated, None))))
}
