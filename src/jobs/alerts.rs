//! Alert tiers (SPEC §6), per endpoint and never per event: failing for an
//! hour, again at a day, before the oldest waiting delivery expires, and a
//! summary of what expired once a wave of expirations is over. Each fires
//! once: a conditional update decides which node writes it.

use std::time::Duration;

use crate::{
    clock::{SharedClock, Timestamp},
    store::{Endpoint, Store, StoreError},
};

const HOUR_MS: i64 = 3_600_000;
/// Warn this long before the oldest waiting delivery gives up.
const EXPIRY_WARNING_MS: i64 = HOUR_MS;
/// Summarise expirations once none has happened for this long.
const QUIET_MS: i64 = 10 * 60_000;

/// One pass; returns how many notifications it wrote.
pub async fn evaluate(store: &Store, now: Timestamp) -> Result<usize, StoreError> {
    let mut written = 0;
    // The day tier first, so an endpoint found late gets one alert, not two.
    for (tier, hours) in [(2, 24), (1, 1)] {
        for e in store
            .failing_below_tier(tier, Timestamp(now.millis() - hours * HOUR_MS))
            .await?
        {
            if store.raise_alert_level(&e.id, tier).await? {
                failing_alert(store, &e, hours, now).await?;
                written += 1;
            }
        }
    }
    for soon in store
        .expiring_before(Timestamp(now.millis() + EXPIRY_WARNING_MS))
        .await?
    {
        if store
            .mark_expiry_warned(&soon.endpoint_id, soon.oldest_give_up_at)
            .await?
        {
            let Some(e) = gone_is_none(store.endpoint_by_id(&soon.endpoint_id).await)? else {
                continue;
            };
            let minutes = (soon.oldest_give_up_at - now.millis()).max(0) / 60_000;
            let subject = format!("Deliveries to {} are about to expire", e.url);
            let body = format!(
                "The oldest of the {} deliveries waiting for {} gives up in about {minutes} minutes \
                 ({}). Fix the receiver or resume the endpoint now, or resend them from the \
                 dashboard after they expire.",
                soon.waiting,
                e.url,
                Timestamp(soon.oldest_give_up_at).to_rfc3339()
            );
            store
                .add_notification(
                    &e.account_id,
                    Some(&e.id),
                    "expiry_warning",
                    &subject,
                    &body,
                    now,
                )
                .await?;
            written += 1;
        }
    }
    for wave in store
        .unsummarised_expiries(Timestamp(now.millis() - QUIET_MS))
        .await?
    {
        let Some(e) = gone_is_none(store.endpoint_by_id(&wave.endpoint_id).await)? else {
            continue;
        };
        let after = e.alert_summary_at.unwrap_or(0);
        if !store.mark_summarised(&e.id, wave.last_at).await? {
            continue;
        }
        let last = store.last_expired(&e.id, after, 5).await?;
        let ids: Vec<&str> = last.iter().map(|(id, _)| id.as_str()).collect();
        let status = last
            .first()
            .and_then(|(_, s)| *s)
            .map_or_else(|| "no response".to_string(), |s| format!("HTTP {s}"));
        let subject = format!("{} deliveries to {} expired", wave.expired, e.url);
        let body = format!(
            "{} deliveries to {} expired without being delivered. The last ones: {}. \
             The last answer was {status}. They are in the dead-letter queue: resend them \
             from the dashboard once the receiver works.",
            wave.expired,
            e.url,
            ids.join(", ")
        );
        store
            .add_notification(
                &e.account_id,
                Some(&e.id),
                "expired_summary",
                &subject,
                &body,
                now,
            )
            .await?;
        written += 1;
    }
    Ok(written)
}

/// An endpoint deleted while the pass ran has nothing left to alert about.
fn gone_is_none(found: Result<Endpoint, StoreError>) -> Result<Option<Endpoint>, StoreError> {
    match found {
        Ok(e) => Ok(Some(e)),
        Err(StoreError::NotFound) => Ok(None),
        Err(e) => Err(e),
    }
}

async fn failing_alert(
    store: &Store,
    e: &Endpoint,
    hours: i64,
    now: Timestamp,
) -> Result<(), StoreError> {
    let span = if hours >= 24 { "a day" } else { "an hour" };
    let subject = format!("{} has been failing for {span}", e.url);
    let body =
        format!(
        "Deliveries to {} have not succeeded since {}. We keep retrying with backoff until each \
         delivery's retry window ends; the endpoint's page shows the last errors.",
        e.url,
        e.failing_since.map(|t| Timestamp(t).to_rfc3339()).unwrap_or_default()
    );
    store
        .add_notification(&e.account_id, Some(&e.id), "failing", &subject, &body, now)
        .await?;
    Ok(())
}

/// Evaluates every `every` until `shutdown`.
pub fn spawn(
    store: Store,
    clock: SharedClock,
    every: Duration,
    shutdown: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Err(e) = evaluate(&store, clock.now()).await {
                tracing::error!(error = %e, "alert evaluation failed; will try again");
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
        }
    })
}
