//! Endpoints: a customer's receivers. Every action on one lives here once,
//! scoped to an account, for the REST API and the dashboard alike: what a
//! valid endpoint is, the pause reason, the rotation overlap, that a
//! resume wakes the workers, the test event.

mod endpoint_url;
mod lookalike_host;
mod validation;

pub use endpoint_url::{EndpointUrl, MAX_URL_CHARS};
pub use validation::{
    check_limits, check_types, checked_retry_policy, checked_url, DEFAULT_MAX_IN_FLIGHT,
    MAX_RATE_LIMIT, UNLIMITED,
};

use crate::{
    clock::Timestamp,
    context::Ctx,
    delivery::signing,
    error::{Error, OrNotFound, Result},
    events, ids,
    store::{
        Attempt, Endpoint, EndpointPatch, EndpointState, Health, LastAttempt, NewEndpoint,
        NewEvent, StoreError, WindowStats,
    },
};

const DAY_MS: i64 = 24 * 3_600_000;

/// An endpoint as a customer asks for it, before it is checked.
#[derive(Debug, Clone, Default)]
pub struct EndpointInput {
    pub url: String,
    pub description: String,
    pub event_types: Vec<String>,
    pub rate_limit_per_sec: Option<i64>,
    pub max_in_flight: Option<i64>,
    /// `exponential`, `linear` or `fixed`; `None` follows the installation.
    pub retry_strategy: Option<String>,
    /// Statuses to retry (`408,429,5xx`); `None` follows the installation.
    pub retry_statuses: Option<String>,
}

/// A change as a customer asks for it; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct EndpointChange {
    pub url: Option<String>,
    pub description: Option<String>,
    pub event_types: Option<Vec<String>>,
    /// `Some(None)` goes back to the installation's default.
    pub rate_limit_per_sec: Option<Option<i64>>,
    pub max_in_flight: Option<i64>,
    /// `Some(None)` follows the installation's policy again.
    pub retry_strategy: Option<Option<String>>,
    pub retry_statuses: Option<Option<String>>,
}

/// The starts per second the endpoint is held to: its own limit, else the
/// installation's default; `None` is no limit.
pub fn rate_limit(e: &Endpoint, default: Option<i64>) -> Option<i64> {
    match e.rate_limit_per_sec {
        Some(UNLIMITED) => None,
        Some(own) => Some(own),
        None => default,
    }
}

/// "throttled until T (receiver asked, 429)" while a 429/503 holds the
/// endpoint's deliveries.
pub fn throttle_note(e: &Endpoint, now: Timestamp) -> Option<String> {
    let (until, status) = e.throttle_at(now.millis())?;
    let asked = status.map_or_else(String::new, |s| format!(", {s}"));
    Some(format!(
        "throttled until {} (receiver asked{asked})",
        Timestamp(until).to_rfc3339()
    ))
}

/// A new endpoint with a fresh signing secret (the returned endpoint
/// carries it, to be shown once).
pub async fn create(ctx: &Ctx, account_id: &str, input: EndpointInput) -> Result<Endpoint> {
    check_types(&input.event_types)?;
    check_limits(input.rate_limit_per_sec, input.max_in_flight)?;
    let (retry_strategy, retry_statuses) = checked_retry_policy(
        input.retry_strategy.as_deref(),
        input.retry_statuses.as_deref(),
    )?;
    let new = NewEndpoint {
        retry_strategy,
        retry_statuses,
        account_id: account_id.to_string(),
        url: checked_url(&input.url, &ctx.engine.settings().targets).await?,
        description: input.description,
        event_types: input.event_types,
        secret: signing::new_secret(),
        rate_limit_per_sec: input.rate_limit_per_sec,
        max_in_flight: input.max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT),
    };
    let most = ctx.config.max_endpoints_per_account;
    ctx.store
        .create_endpoint_within(new, most, ctx.clock.now())
        .await?
        .ok_or_else(|| Error::ConflictCode {
            code: "endpoint_limit",
            message: format!(
                "this account has {most} endpoints, the most one account may have; \
                 delete one first (--max-endpoints-per-account)"
            ),
        })
}

pub async fn list(ctx: &Ctx, account_id: &str) -> Result<Vec<Endpoint>> {
    Ok(ctx.store.list_endpoints(account_id).await?)
}

/// One endpoint of the account; another account's is not found.
pub async fn get(ctx: &Ctx, account_id: &str, id: &str) -> Result<Endpoint> {
    ctx.store
        .endpoint(account_id, id)
        .await
        .or_not_found("endpoint")
}

pub async fn update(
    ctx: &Ctx,
    account_id: &str,
    id: &str,
    change: EndpointChange,
) -> Result<Endpoint> {
    if let Some(types) = &change.event_types {
        check_types(types)?;
    }
    check_limits(change.rate_limit_per_sec.flatten(), change.max_in_flight)?;
    let url = match change.url.as_deref() {
        Some(raw) => Some(checked_url(raw, &ctx.engine.settings().targets).await?),
        None => None,
    };
    let (strategy, statuses) = checked_retry_policy(
        change.retry_strategy.clone().flatten().as_deref(),
        change.retry_statuses.clone().flatten().as_deref(),
    )?;
    let patch = EndpointPatch {
        retry_strategy: change.retry_strategy.map(|s| s.and(strategy)),
        retry_statuses: change.retry_statuses.map(|s| s.and(statuses)),
        url,
        description: change.description,
        event_types: change.event_types,
        rate_limit_per_sec: change.rate_limit_per_sec,
        max_in_flight: change.max_in_flight,
    };
    ctx.store
        .update_endpoint(account_id, id, patch, ctx.clock.now())
        .await
        .or_not_found("endpoint")
}

/// Deletes the endpoint and, with it, its deliveries. That may take a while
/// (batches); it runs to the end even if the caller goes away.
pub async fn delete(ctx: &Ctx, account_id: &str, id: &str) -> Result<()> {
    let store = ctx.store.clone();
    let (account_id, id) = (account_id.to_string(), id.to_string());
    tokio::spawn(async move { store.delete_endpoint(&account_id, &id).await })
        .await
        .map_err(|e| StoreError::Config(format!("the deletion stopped: {e}")))?
        .or_not_found("endpoint")
}

/// Events keep queueing while paused.
pub async fn pause(ctx: &Ctx, account_id: &str, id: &str) -> Result<Endpoint> {
    ctx.store
        .set_endpoint_state(
            account_id,
            id,
            EndpointState::Paused,
            Some("paused by the customer"),
            ctx.clock.now(),
        )
        .await
        .or_not_found("endpoint")
}

/// What queued while paused goes out at once.
/// What a resume found: the endpoint as it now is, the deliveries that
/// will drain now, and those whose window passed while it was paused
/// (expired, not sent).
#[derive(Debug)]
pub struct Resumed {
    pub endpoint: Endpoint,
    pub waiting: i64,
    pub past_window: i64,
}

/// The queue drains. Anything whose window passed meanwhile expires
/// first, so what is sent and what is counted agree.
pub async fn resume(ctx: &Ctx, account_id: &str, id: &str) -> Result<Resumed> {
    let now = ctx.clock.now();
    let before = get(ctx, account_id, id).await?;
    crate::jobs::deadlines::run_once(&ctx.store, now).await?;
    let since = Timestamp(before.paused_at.unwrap_or(now.millis()));
    let (waiting, past_window) = ctx
        .store
        .paused_backlog(id, crate::jobs::deadlines::REASON, since)
        .await?;
    let endpoint = ctx
        .store
        .resume_endpoint(account_id, id, now)
        .await
        .or_not_found("endpoint")?;
    ctx.engine.wake().await;
    Ok(Resumed {
        endpoint,
        waiting,
        past_window,
    })
}

/// What a paused endpoint's queue holds, for the discard preview: its
/// pending deliveries.
pub async fn queued(ctx: &Ctx, account_id: &str, id: &str) -> Result<i64> {
    let e = get(ctx, account_id, id).await?;
    Ok(ctx.store.pending_of_endpoint(&e.id).await?)
}

/// What a discarded delivery says.
pub const DISCARDED: &str = "discarded from the paused queue by the customer";

/// Ends every pending delivery of a paused endpoint (expired, with the
/// reason, so each can still be resent or replayed). `expected` is the
/// count the customer was shown: if the queue holds another number
/// now, nothing is discarded and the answer says the current count.
pub async fn discard_queue(
    ctx: &Ctx,
    account_id: &str,
    id: &str,
    expected: Option<i64>,
) -> Result<i64> {
    let e = get(ctx, account_id, id).await?;
    if e.state != EndpointState::Paused {
        return Err(Error::Conflict(
            "only a paused endpoint's queue can be discarded: pause it first".into(),
        ));
    }
    let pending = ctx.store.pending_of_endpoint(&e.id).await?;
    if let Some(expected) = expected.filter(|n| *n != pending) {
        return Err(Error::ConflictCode {
            code: "queue_changed",
            message: format!(
                "the queue holds {pending} deliveries now, not {expected}: nothing was discarded; look again and confirm that number"
            ),
        });
    }
    let discarded = ctx
        .store
        .discard_pending(&e.id, DISCARDED, ctx.clock.now())
        .await?;
    let discarded = i64::try_from(discarded).unwrap_or(i64::MAX);
    tracing::info!(endpoint = %e.id, discarded, "paused queue discarded");
    Ok(discarded)
}

/// A new secret; the old one keeps signing for the configured overlap.
pub async fn rotate_secret(ctx: &Ctx, account_id: &str, id: &str) -> Result<Endpoint> {
    let now = ctx.clock.now();
    let overlap = ctx.engine.settings().rotation_overlap;
    ctx.store
        .rotate_secret(
            account_id,
            id,
            &signing::new_secret(),
            now.plus(overlap),
            now,
        )
        .await
        .or_not_found("endpoint")
}

/// Sends a `dakghar.test` event to this endpoint only, whatever its
/// filter; returns the event's id.
pub async fn send_test_event(ctx: &Ctx, account_id: &str, id: &str) -> Result<String> {
    let endpoint = get(ctx, account_id, id).await?;
    let event_id = format!("{}_test", ids::new_id(ids::EVENT));
    let payload = serde_json::json!({
        "message": "A test event from the Dakghar dashboard",
        "endpoint_id": endpoint.id,
        "sent_at": ctx.clock.now().to_rfc3339(),
    });
    let new = NewEvent {
        account_id: account_id.to_string(),
        id: event_id.clone(),
        event_type: "dakghar.test".to_string(),
        payload: payload.to_string().into_bytes(),
    };
    events::ingest(ctx, new, Some(&endpoint.id), None, None).await?;
    Ok(event_id)
}

/// Each endpoint of the account with its last 24 hours and last attempt.
pub struct Overview {
    pub endpoint: Endpoint,
    pub day: WindowStats,
    pub last_attempt: Option<LastAttempt>,
}

pub async fn overview(ctx: &Ctx, account_id: &str) -> Result<Vec<Overview>> {
    let store = &ctx.store;
    let now = ctx.clock.now();
    let endpoints = store.list_endpoints(account_id).await?;
    let mut stats = store
        .account_endpoint_stats(account_id, Timestamp(now.millis() - DAY_MS))
        .await?;
    let mut last = store.last_attempts(account_id).await?;
    Ok(endpoints
        .into_iter()
        .map(|endpoint| Overview {
            day: stats.remove(&endpoint.id).unwrap_or_default(),
            last_attempt: last.remove(&endpoint.id),
            endpoint,
        })
        .collect())
}

/// Success rates, latency, attempts per hour and the queue.
pub async fn health(ctx: &Ctx, account_id: &str, id: &str) -> Result<(Endpoint, Health)> {
    let endpoint = get(ctx, account_id, id).await?;
    let health = ctx
        .store
        .endpoint_health(&endpoint.id, ctx.clock.now())
        .await?;
    Ok((endpoint, health))
}

/// Everything the endpoint's page shows.
pub struct Report {
    pub endpoint: Endpoint,
    pub health: Health,
    pub last_attempt: Option<LastAttempt>,
    /// The last failed attempts, newest first, each with its event's id.
    pub last_errors: Vec<(Attempt, String)>,
}

pub async fn report(ctx: &Ctx, account_id: &str, id: &str) -> Result<Report> {
    let (endpoint, health) = health(ctx, account_id, id).await?;
    let store = &ctx.store;
    let last_attempt = store.last_attempts(account_id).await?.remove(&endpoint.id);
    let mut last_errors = Vec::new();
    for a in &health.last_errors {
        let event_id = store.delivery(&a.delivery_id).await?.event_id;
        last_errors.push((a.clone(), event_id));
    }
    Ok(Report {
        endpoint,
        health,
        last_attempt,
        last_errors,
    })
}

/// The endpoint's signing secret, for the customer to copy.
pub async fn reveal_secret(ctx: &Ctx, account_id: &str, id: &str) -> Result<String> {
    let secret = get(ctx, account_id, id).await?.secret;
    if secret.is_empty() {
        return Err(Error::Conflict(
            "the stored signing secret does not open with this installation's secrets key; \
             rotate it to make a new one"
                .into(),
        ));
    }
    Ok(secret)
}
