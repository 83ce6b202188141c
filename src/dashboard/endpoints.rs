//! The endpoints pages' data and actions, scoped to the viewer's account.

use std::collections::HashMap;

use app::{
    error::AppError,
    model::{
        endpoints::{
            Condition, EndpointDetail, EndpointSummary, ErrorLine, LastAttempt, NewEndpointForm,
        },
        Viewer,
    },
};

use super::internal;
use crate::{
    api::endpoints::{check_limits, check_types, url},
    clock::Timestamp,
    context::Ctx,
    delivery::{classify::explain, signing},
    endpoints as endpoint_actions, ids,
    store::{self, CircuitState, Endpoint, EndpointState, NewEndpoint, NewEvent, WindowStats},
};

const DAY_MS: i64 = 24 * 3_600_000;

fn condition(e: &Endpoint, now: Timestamp) -> Condition {
    match e.state {
        EndpointState::Paused => Condition::Paused {
            reason: e.pause_reason.clone(),
        },
        EndpointState::Disabled => Condition::Disabled,
        EndpointState::Active => match (e.circuit_state, e.circuit_open_until, e.failing_since) {
            (CircuitState::Open, Some(until), _) if until > now.millis() => {
                Condition::CircuitOpen { until }
            }
            (_, _, Some(since)) => Condition::Failing { since },
            _ => Condition::Healthy,
        },
    }
}

fn summary(
    e: &Endpoint,
    stats: Option<&WindowStats>,
    last: Option<&store::LastAttempt>,
    now: Timestamp,
) -> EndpointSummary {
    let stats = stats.cloned().unwrap_or_default();
    EndpointSummary {
        id: e.id.clone(),
        url: e.url.clone(),
        description: e.description.clone(),
        event_types: e.event_type_filter(),
        condition: condition(e, now),
        attempts_24h: stats.attempts,
        delivered_24h: stats.delivered,
        last_attempt: last.map(|l| LastAttempt {
            at: l.started_at,
            status: l.response_status,
            delivered: l.classification == "delivered",
        }),
    }
}

pub async fn list(ctx: &Ctx, viewer: &Viewer) -> Result<Vec<EndpointSummary>, AppError> {
    let now = ctx.clock.now();
    let store = &ctx.store;
    let endpoints = store
        .list_endpoints(&viewer.account_id)
        .await
        .map_err(internal)?;
    let stats = store
        .account_endpoint_stats(&viewer.account_id, Timestamp(now.millis() - DAY_MS))
        .await
        .map_err(internal)?;
    let last: HashMap<String, store::LastAttempt> = store
        .last_attempts(&viewer.account_id)
        .await
        .map_err(internal)?;
    Ok(endpoints
        .iter()
        .map(|e| summary(e, stats.get(&e.id), last.get(&e.id), now))
        .collect())
}

pub async fn detail(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<EndpointDetail, AppError> {
    let now = ctx.clock.now();
    let store = &ctx.store;
    let e = store
        .endpoint(&viewer.account_id, id)
        .await
        .map_err(internal)?;
    let health = store.endpoint_health(&e.id, now).await.map_err(internal)?;
    let last = store
        .last_attempts(&viewer.account_id)
        .await
        .map_err(internal)?;
    let mut last_errors = Vec::new();
    for a in &health.last_errors {
        let event_id = store
            .delivery(&a.delivery_id)
            .await
            .map_err(internal)?
            .event_id;
        last_errors.push(ErrorLine {
            at: a.started_at,
            event_id,
            status: a.response_status,
            explanation: explain(
                a.response_status.and_then(|s| u16::try_from(s).ok()),
                &a.classification,
            ),
            error: a.error.clone(),
        });
    }
    Ok(EndpointDetail {
        now: now.millis(),
        summary: summary(&e, Some(&health.day), last.get(&e.id), now),
        rate_limit_per_sec: e.rate_limit_per_sec,
        max_in_flight: e.max_in_flight,
        attempts_7d: health.week.attempts,
        delivered_7d: health.week.delivered,
        avg_ms_24h: health.day.avg_ms,
        p95_ms_24h: health.p95_ms_day,
        hourly: health.hourly,
        last_errors,
        pending: health.pending,
        in_flight: health.in_flight,
        previous_secret_until: e
            .previous_secret_expires_at
            .filter(|until| *until > now.millis()),
    })
}

fn optional_number(raw: &str, name: &str) -> Result<Option<i64>, AppError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    raw.parse()
        .map(Some)
        .map_err(|_| AppError::Invalid(format!("{name} must be a whole number")))
}

pub async fn create(ctx: &Ctx, viewer: &Viewer, form: NewEndpointForm) -> Result<String, AppError> {
    let invalid = |e: crate::api::error::ApiError| AppError::Invalid(e.message);
    let event_types: Vec<String> = form
        .event_types
        .split([',', ' ', '\n'])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    check_types(&event_types).map_err(invalid)?;
    let rate = optional_number(&form.rate_limit_per_sec, "the rate limit")?;
    let in_flight = optional_number(&form.max_in_flight, "max in flight")?;
    check_limits(rate, in_flight).map_err(invalid)?;
    let new = NewEndpoint {
        account_id: viewer.account_id.clone(),
        url: url(&form.url, &ctx.engine.settings().targets)
            .await
            .map_err(invalid)?,
        description: form.description.trim().to_string(),
        event_types,
        secret: signing::new_secret(),
        rate_limit_per_sec: rate,
        max_in_flight: in_flight.unwrap_or(10),
    };
    let created = ctx
        .store
        .create_endpoint(new, ctx.clock.now())
        .await
        .map_err(internal)?;
    Ok(created.id)
}

pub async fn delete(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<(), AppError> {
    ctx.store
        .delete_endpoint(&viewer.account_id, id)
        .await
        .map_err(internal)
}

pub async fn set_paused(
    ctx: &Ctx,
    viewer: &Viewer,
    id: &str,
    paused: bool,
) -> Result<(), AppError> {
    let done = if paused {
        endpoint_actions::pause(ctx, &viewer.account_id, id).await
    } else {
        endpoint_actions::resume(ctx, &viewer.account_id, id).await
    };
    done.map(|_| ()).map_err(internal)
}

pub async fn rotate(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<(), AppError> {
    endpoint_actions::rotate_secret(ctx, &viewer.account_id, id)
        .await
        .map(|_| ())
        .map_err(internal)
}

pub async fn reveal(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<String, AppError> {
    let e = ctx
        .store
        .endpoint(&viewer.account_id, id)
        .await
        .map_err(internal)?;
    Ok(e.secret)
}

pub async fn send_test(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<String, AppError> {
    let now = ctx.clock.now();
    let e = ctx
        .store
        .endpoint(&viewer.account_id, id)
        .await
        .map_err(internal)?;
    let event_id = format!("{}_test", ids::new_id(ids::EVENT));
    let payload = serde_json::json!({
        "message": "A test event from the Dakghar dashboard",
        "endpoint_id": e.id,
        "sent_at": now.to_rfc3339(),
    });
    let new = NewEvent {
        account_id: viewer.account_id.clone(),
        id: event_id.clone(),
        event_type: "dakghar.test".to_string(),
        payload: payload.to_string().into_bytes(),
    };
    let give_up = now.plus(ctx.engine.settings().retry_window);
    ctx.store
        .insert_event_for(new, Some(&e.id), now, give_up)
        .await
        .map_err(internal)?;
    ctx.engine.wake().await;
    Ok(event_id)
}
