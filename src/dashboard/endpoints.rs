//! The endpoints pages' data and actions, scoped to the viewer's account.

use app::{
    error::AppError,
    model::{
        endpoints::{
            Condition, EndpointDetail, EndpointForm, EndpointSummary, ErrorLine, LastAttempt,
            Resumed,
        },
        Viewer,
    },
};

use crate::{
    clock::Timestamp,
    context::Ctx,
    delivery::classify::explain,
    endpoints::{self, EndpointInput, Overview},
    store::{self, CircuitState, Endpoint, EndpointState, WindowStats},
};

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
    stats: &WindowStats,
    last: Option<&store::LastAttempt>,
    now: Timestamp,
) -> EndpointSummary {
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
    Ok(endpoints::overview(ctx, &viewer.account_id)
        .await?
        .iter()
        .map(|o: &Overview| summary(&o.endpoint, &o.day, o.last_attempt.as_ref(), now))
        .collect())
}

pub async fn detail(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<EndpointDetail, AppError> {
    let now = ctx.clock.now();
    let report = endpoints::report(ctx, &viewer.account_id, id).await?;
    let (e, health) = (&report.endpoint, &report.health);
    let throttle = e.throttle_at(now.millis());
    let last_errors = report
        .last_errors
        .iter()
        .map(|(a, event_id)| ErrorLine {
            at: a.started_at,
            event_id: event_id.clone(),
            status: a.response_status,
            explanation: explain(
                a.response_status.and_then(|s| u16::try_from(s).ok()),
                &a.classification,
            ),
            error: a.error.clone(),
        })
        .collect();
    Ok(EndpointDetail {
        now: now.millis(),
        summary: summary(e, &health.day, report.last_attempt.as_ref(), now),
        rate_limit_per_sec: endpoints::rate_limit(e, ctx.engine.settings().default_rate_limit),
        rate_limit_is_default: e.rate_limit_per_sec.is_none(),
        max_in_flight: e.max_in_flight,
        in_flight_cap: e.adaptive_in_flight(),
        throttled_until: throttle.map(|(until, _)| until),
        throttle_status: throttle.and_then(|(_, status)| status),
        attempts_7d: health.week.attempts,
        delivered_7d: health.week.delivered,
        avg_ms_24h: health.day.avg_ms,
        p95_ms_24h: health.p95_ms_day,
        hourly: health.hourly.clone(),
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

/// Empty for the default, a number, or `unlimited`.
fn rate_limit(raw: &str) -> Result<Option<i64>, AppError> {
    if raw.trim().eq_ignore_ascii_case("unlimited") {
        return Ok(Some(endpoints::UNLIMITED));
    }
    match optional_number(raw, "the rate limit")? {
        // 0 is how "unlimited" is stored, not a limit anyone types.
        Some(endpoints::UNLIMITED) => Err(AppError::Invalid(
            "the rate limit must be at least 1 per second, or unlimited".into(),
        )),
        n => Ok(n),
    }
}

pub async fn create(ctx: &Ctx, viewer: &Viewer, form: EndpointForm) -> Result<String, AppError> {
    let input = EndpointInput {
        url: form.url,
        description: form.description.trim().to_string(),
        event_types: form
            .event_types
            .split([',', ' ', '\n'])
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect(),
        rate_limit_per_sec: rate_limit(&form.rate_limit_per_sec)?,
        max_in_flight: optional_number(&form.max_in_flight, "max in flight")?,
        ..EndpointInput::default()
    };
    Ok(endpoints::create(ctx, &viewer.account_id, input).await?.id)
}

pub async fn delete(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<(), AppError> {
    Ok(endpoints::delete(ctx, &viewer.account_id, id).await?)
}

pub async fn pause(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<(), AppError> {
    endpoints::pause(ctx, &viewer.account_id, id).await?;
    Ok(())
}

pub async fn resume(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<Resumed, AppError> {
    let r = endpoints::resume(ctx, &viewer.account_id, id).await?;
    Ok(Resumed {
        waiting: r.waiting,
        past_window: r.past_window,
    })
}

pub async fn discard_queue(
    ctx: &Ctx,
    viewer: &Viewer,
    id: &str,
    expected: i64,
) -> Result<i64, AppError> {
    Ok(endpoints::discard_queue(ctx, &viewer.account_id, id, Some(expected)).await?)
}

pub async fn rotate(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<(), AppError> {
    endpoints::rotate_secret(ctx, &viewer.account_id, id).await?;
    Ok(())
}

pub async fn reveal(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<String, AppError> {
    Ok(endpoints::reveal_secret(ctx, &viewer.account_id, id).await?)
}

pub async fn send_test(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<String, AppError> {
    Ok(endpoints::send_test_event(ctx, &viewer.account_id, id).await?)
}
