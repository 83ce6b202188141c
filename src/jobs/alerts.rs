//! Alert tiers (SPEC §6, §11), per endpoint and never per event: failing
//! for an hour, again at a day (only while an active endpoint is failing
//! now), before the oldest waiting delivery expires, and a
//! summary of what expired once a wave of expirations is over. Each fires
//! once: a conditional update decides which node writes it.

pub mod texts;

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::{
    clock::{SharedClock, Timestamp},
    store::{Endpoint, Store, StoreError},
};

const HOUR_MS: i64 = 3_600_000;
/// Warn this long before the oldest waiting delivery gives up.
const EXPIRY_WARNING_MS: i64 = HOUR_MS;
/// Summarise expirations once none has happened for this long.
const QUIET_MS: i64 = 10 * 60_000;

/// "Failing now" means an attempt failed this recently: longer than the
/// longest backoff (an hour), so a slow retry schedule still counts.
const RECENT_MS: i64 = 2 * HOUR_MS;

/// One pass; returns how many notifications it wrote. Links in the alerts
/// start with `base`, this installation's public URL.
pub async fn evaluate(store: &Store, now: Timestamp, base: &str) -> Result<usize, StoreError> {
    let mut written = 0;
    let recent = Timestamp(now.millis() - RECENT_MS);
    // The day tier first, so an endpoint found late gets one alert, not two.
    for (tier, hours) in [(2, 24), (1, 1)] {
        for e in store
            .failing_below_tier(tier, Timestamp(now.millis() - hours * HOUR_MS), recent)
            .await?
        {
            if store.raise_alert_level(&e.id, tier).await? {
                let details = store.failing_details(&e.id, 5).await?;
                let links = texts::EndpointLinks::new(base, &e.id);
                let alert = texts::failing(&e.url, hours, e.failing_since, &details, &links, now);
                alert.write(store, &e.account_id, Some(&e.id), now).await?;
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
            let alert = texts::expiry_warning(&e.url, soon.waiting, soon.oldest_give_up_at, now);
            alert.write(store, &e.account_id, Some(&e.id), now).await?;
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
        let status = last.first().and_then(|(_, s)| *s);
        let alert = texts::expired_summary(&e.url, wave.expired, &ids, status);
        alert.write(store, &e.account_id, Some(&e.id), now).await?;
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

/// Evaluates every `every` until `shutdown`.
pub fn spawn(
    store: Store,
    clock: SharedClock,
    every: Duration,
    base: String,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    super::every(every, shutdown, move || {
        let (store, clock, base) = (store.clone(), clock.clone(), base.clone());
        async move {
            if let Err(e) = evaluate(&store, clock.now(), &base).await {
                tracing::error!(error = %e, "alert evaluation failed; will try again");
            }
        }
    })
}
