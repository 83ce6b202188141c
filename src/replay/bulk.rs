//! Bulk replay as the admin API and pages start it: reset the matching
//! dead letters, tell each affected account, wake the workers.

use std::time::Duration;

use crate::{
    context::Ctx,
    store::{Replay, ReplayCriteria, StoreError},
};

/// The longest window a replay may be spread over.
pub const MAX_WINDOW: Duration = Duration::from_secs(24 * 3600);
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(5 * 60);

/// Checks the criteria; returns what is wrong in words.
pub fn check(c: &ReplayCriteria, window: Duration) -> Result<(), String> {
    if !c.failed && !c.expired {
        return Err("choose at least one state to replay: failed, expired or both".into());
    }
    if let (Some(since), Some(until)) = (c.since, c.until) {
        if since >= until {
            return Err("the time range is empty: since must be before until".into());
        }
    }
    if window > MAX_WINDOW {
        return Err("the spread window may be at most 24 hours".into());
    }
    Ok(())
}

pub async fn start(
    ctx: &Ctx,
    criteria: &ReplayCriteria,
    actor: &str,
    window: Duration,
) -> Result<Replay, StoreError> {
    let now = ctx.clock.now();
    let retry_window = ctx.engine.settings().retry_window;
    let (replay, per_account) = ctx
        .store
        .start_replay(criteria, actor, window, retry_window, now)
        .await?;
    let spread = humantime::format_duration(window);
    for (account_id, n) in per_account {
        let subject = format!("We are redelivering {n} events, expect a spike");
        let body = format!(
            "An administrator is redelivering {n} of your failed or expired deliveries, \
             spread over {spread} and within each endpoint's rate limit. Expect more traffic \
             than usual at your endpoints meanwhile; each delivery keeps its webhook-id, so \
             receivers that drop duplicates are safe."
        );
        ctx.store
            .add_notification(&account_id, None, "replay", &subject, &body, now)
            .await?;
    }
    tracing::info!(replay = %replay.id, count = replay.count, actor, "bulk replay started");
    metrics::counter!("dakghar_replays_total").increment(1);
    metrics::counter!("dakghar_replayed_deliveries_total")
        .increment(u64::try_from(replay.count).unwrap_or(0));
    ctx.engine.wake().await;
    Ok(replay)
}
