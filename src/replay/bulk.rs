//! Bulk replay (SPEC §5), admins only: preview what matches, reset it
//! spread over a window (and within each endpoint's rate limit), tell each
//! affected account, follow it, cancel what has not been attempted yet.

use std::{collections::HashMap, time::Duration};

use crate::{
    clock::Timestamp,
    context::Ctx,
    error::{Error, OrNotFound, Result},
    jobs::alerts::texts,
    store::{Replay, ReplayCriteria, ReplayGroup, ReplayProgress, ReplayRun, StoreError},
};

/// The longest window a replay may be spread over.
pub const MAX_WINDOW: Duration = Duration::from_secs(24 * 3600);
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(5 * 60);

/// Every refusal of a replay's criteria is this code.
const INVALID: &str = "invalid_criteria";

/// Checks the criteria and the window; says what is wrong in words.
pub fn check(c: &ReplayCriteria, window: Duration) -> Result<()> {
    let refuse = |m: &str| Err(Error::invalid(INVALID, m));
    if !c.failed && !c.expired && !c.pending {
        return refuse("choose at least one state to replay: failed, expired or pending");
    }
    if let (Some(since), Some(until)) = (c.since, c.until) {
        if since >= until {
            return refuse("the time range is empty: since must be before until");
        }
    }
    if window > MAX_WINDOW {
        return refuse("the spread window may be at most 24 hours");
    }
    Ok(())
}

/// How many deliveries per endpoint a replay would reset; nothing changes.
pub async fn preview(ctx: &Ctx, c: &ReplayCriteria, window: Duration) -> Result<Vec<ReplayGroup>> {
    check(c, window)?;
    Ok(ctx.store.replay_preview(c).await?)
}

/// Starts a bulk replay on behalf of `actor`; returns its audit row.
pub async fn start(
    ctx: &Ctx,
    criteria: &ReplayCriteria,
    actor: &str,
    window: Duration,
) -> Result<Replay> {
    check(criteria, window)?;
    let now = ctx.clock.now();
    // A large replay is announced before it starts (chapter 003), so the
    // receivers' owners can get ready for the spike.
    let total = ctx.store.replay_total(criteria).await?;
    let starts_at = if total > ctx.config.replay_notice_threshold {
        now.plus(ctx.config.replay_notice)
    } else {
        now
    };
    let (replay, per_account) = launch(ctx, criteria, actor, "bulk", window, starts_at).await?;
    let spread = humantime::format_duration(window).to_string();
    for (account_id, n) in per_account {
        texts::redelivering(n, &spread, (starts_at > now).then_some(starts_at))
            .write(&ctx.store, &account_id, None, now)
            .await?;
    }
    Ok(replay)
}

/// Resets what matches, spread over `window` from `starts_at`, under an
/// audit row of `kind`, and wakes the workers. Returns the row and how
/// many deliveries of each account were reset.
pub(super) async fn launch(
    ctx: &Ctx,
    criteria: &ReplayCriteria,
    actor: &str,
    kind: &str,
    window: Duration,
    starts_at: Timestamp,
) -> Result<(Replay, HashMap<String, i64>)> {
    let now = ctx.clock.now();
    let retry_window = ctx.engine.settings().retry_window;
    let started = match ctx
        .store
        .start_replay(
            criteria,
            ReplayRun {
                actor,
                kind,
                window,
                retry_window,
                now,
                starts_at,
            },
        )
        .await
    {
        Ok(started) => started,
        Err(StoreError::NotFound) => {
            return Err(Error::invalid(INVALID, "no account has that account_id"))
        }
        Err(e) => return Err(e.into()),
    };
    let replay = &started.0;
    tracing::info!(replay = %replay.id, kind, count = replay.count, actor, "replay started");
    metrics::counter!("dakghar_replays_total").increment(1);
    metrics::counter!("dakghar_replayed_deliveries_total")
        .increment(u64::try_from(replay.count).unwrap_or(0));
    ctx.engine.wake().await;
    Ok(started)
}

/// A replay and where its deliveries are now.
pub async fn status(ctx: &Ctx, id: &str) -> Result<(Replay, ReplayProgress)> {
    ctx.store.finish_replays(Some(id)).await?;
    let replay = ctx.store.replay(id).await.or_not_found("replay")?;
    let progress = ctx.store.replay_progress(id).await?;
    Ok((replay, progress))
}

/// Returns what the replay has not attempted yet to the dead-letter queue;
/// returns how many.
pub async fn cancel(ctx: &Ctx, id: &str, actor: &str) -> Result<u64> {
    let reverted = ctx
        .store
        .cancel_replay(id, ctx.clock.now())
        .await
        .or_not_found("replay")?;
    tracing::info!(replay = %id, reverted, actor, "bulk replay cancelled");
    Ok(reverted)
}

/// The audit log, newest first: every resend and bulk replay.
pub async fn audit_log(ctx: &Ctx) -> Result<Vec<Replay>> {
    ctx.store.finish_replays(None).await?;
    Ok(ctx.store.replays(None, 200).await?)
}
