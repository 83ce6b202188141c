//! The endpoints pages' data and actions, scoped to the viewer's account.

use app::{
    error::{AppError, FieldErrors},
    model::{
        endpoints::{
            Condition, EndpointDetail, EndpointForm, EndpointSummary, ErrorLine, LastAttempt,
            LatencyPoint, RecoverForm, RecoverPreview, Resumed,
        },
        Viewer,
    },
};

use crate::{
    clock::Timestamp,
    context::Ctx,
    delivery::classify::explain,
    endpoints::{self, EndpointChange, EndpointInput, Overview},
    replay,
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

fn latency(points: &[store::Latency]) -> Vec<LatencyPoint> {
    points
        .iter()
        .map(|l| LatencyPoint {
            start: l.start,
            p50_ms: l.p50_ms,
            p95_ms: l.p95_ms,
        })
        .collect()
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
        fault: e.fault.clone().zip(e.fault_at),
        attempts_7d: health.week.attempts,
        delivered_7d: health.week.delivered,
        avg_ms_24h: health.day.avg_ms,
        p95_ms_24h: health.p95_ms_day,
        hourly: health.hourly.clone(),
        latency_hourly: latency(&health.latency_hourly),
        latency_daily: latency(&health.latency_daily),
        last_errors,
        pending: health.pending,
        in_flight: health.in_flight,
        previous_secret_until: e
            .previous_secret_expires_at
            .filter(|until| *until > now.millis()),
    })
}

fn optional_number(raw: &str, name: &str) -> Result<Option<i64>, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    raw.parse()
        .map(Some)
        .map_err(|_| format!("{name} must be a whole number"))
}

/// Empty for the default, a number, or `unlimited`.
fn rate_limit(raw: &str) -> Result<Option<i64>, String> {
    if raw.trim().eq_ignore_ascii_case("unlimited") {
        return Ok(Some(endpoints::UNLIMITED));
    }
    match optional_number(raw, "the rate limit")? {
        // 0 is how "unlimited" is stored, not a limit anyone types.
        Some(endpoints::UNLIMITED) => {
            Err("the rate limit must be at least 1 per second, or unlimited".into())
        }
        n => endpoints::check_limits(n, None)
            .map(|()| n)
            .map_err(|e| e.to_string()),
    }
}

fn max_in_flight(raw: &str) -> Result<Option<i64>, String> {
    let n = optional_number(raw, "max in flight")?;
    endpoints::check_limits(None, n)
        .map(|()| n)
        .map_err(|e| e.to_string())
}

fn event_types(raw: &str) -> Result<Vec<String>, String> {
    let types: Vec<String> = raw
        .split([',', ' ', '\n'])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    endpoints::check_types(&types)
        .map(|()| types)
        .map_err(|e| e.to_string())
}

fn take<T>(errors: &mut Vec<(String, String)>, field: &str, r: Result<T, String>) -> Option<T> {
    r.map_err(|m| errors.push((field.to_string(), m))).ok()
}

/// Every field checked on its own, so the form can mark each wrong one at
/// once instead of one per try.
async fn checked(ctx: &Ctx, form: EndpointForm) -> Result<EndpointInput, AppError> {
    let mut errors = Vec::new();
    let url = endpoints::checked_url(&form.url, &ctx.engine.settings().targets)
        .await
        .map_err(|e| e.to_string());
    let url = take(&mut errors, "url", url);
    let types = take(&mut errors, "event_types", event_types(&form.event_types));
    let rate = take(
        &mut errors,
        "rate_limit_per_sec",
        rate_limit(&form.rate_limit_per_sec),
    );
    let in_flight = take(
        &mut errors,
        "max_in_flight",
        max_in_flight(&form.max_in_flight),
    );
    match (url, types, rate, in_flight) {
        (Some(url), Some(event_types), Some(rate_limit_per_sec), Some(max_in_flight)) => {
            Ok(EndpointInput {
                url,
                description: form.description.trim().to_string(),
                event_types,
                rate_limit_per_sec,
                max_in_flight,
                ..EndpointInput::default()
            })
        }
        _ => Err(AppError::Fields(FieldErrors {
            errors,
            typed: vec![
                ("url".into(), form.url),
                ("description".into(), form.description),
                ("event_types".into(), form.event_types),
                ("rate_limit_per_sec".into(), form.rate_limit_per_sec),
                ("max_in_flight".into(), form.max_in_flight),
            ],
        })),
    }
}

pub async fn create(ctx: &Ctx, viewer: &Viewer, form: EndpointForm) -> Result<String, AppError> {
    let input = checked(ctx, form).await?;
    Ok(endpoints::create(ctx, &viewer.account_id, input).await?.id)
}

/// The whole form replaces the endpoint's settings: an emptied field goes
/// back to its default.
pub async fn update(
    ctx: &Ctx,
    viewer: &Viewer,
    id: &str,
    form: EndpointForm,
) -> Result<(), AppError> {
    endpoints::get(ctx, &viewer.account_id, id).await?;
    let input = checked(ctx, form).await?;
    let change = EndpointChange {
        url: Some(input.url),
        description: Some(input.description),
        event_types: Some(input.event_types),
        rate_limit_per_sec: Some(input.rate_limit_per_sec),
        max_in_flight: Some(
            input
                .max_in_flight
                .unwrap_or(endpoints::DEFAULT_MAX_IN_FLIGHT),
        ),
        ..EndpointChange::default()
    };
    endpoints::update(ctx, &viewer.account_id, id, change).await?;
    Ok(())
}

/// The form as the endpoint is now, for the edit page to start from.
pub async fn form(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<EndpointForm, AppError> {
    let e = endpoints::get(ctx, &viewer.account_id, id).await?;
    let rate_limit_per_sec = match e.rate_limit_per_sec {
        None => String::new(),
        Some(endpoints::UNLIMITED) => "unlimited".to_string(),
        Some(n) => n.to_string(),
    };
    Ok(EndpointForm {
        event_types: e.event_type_filter().join(", "),
        url: e.url,
        description: e.description,
        rate_limit_per_sec,
        max_in_flight: e.max_in_flight.to_string(),
    })
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

/// A wall-clock time typed in a zone, as a moment.
fn moment(form: &RecoverForm) -> Result<Timestamp, AppError> {
    let offset: i64 = match form.offset.trim() {
        "" => 0,
        raw => raw
            .parse()
            .ok()
            .filter(|o: &i64| o.abs() <= 18 * 60)
            .ok_or_else(|| AppError::Invalid("the time zone offset is not valid".into()))?,
    };
    let raw = form.since.trim();
    let wall = chrono::NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S"))
        .map_err(|_| AppError::Invalid("pick a date and time to recover from".into()))?;
    Ok(Timestamp(
        wall.and_utc().timestamp_millis() - offset * 60_000,
    ))
}

pub async fn recover_preview(
    ctx: &Ctx,
    viewer: &Viewer,
    id: &str,
    form: RecoverForm,
) -> Result<RecoverPreview, AppError> {
    let since = moment(&form)?;
    let count = replay::recover::preview(ctx, &viewer.account_id, id, since).await?;
    Ok(RecoverPreview {
        since: since.millis(),
        count,
    })
}

pub async fn recover(ctx: &Ctx, viewer: &Viewer, id: &str, since: i64) -> Result<i64, AppError> {
    let since = Timestamp(since);
    let replay =
        replay::recover::recover(ctx, &viewer.account_id, id, since, &viewer.actor).await?;
    Ok(replay.count)
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
