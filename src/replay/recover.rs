//! Recover (Svix's word for it): once a customer has fixed their receiver,
//! every delivery to that endpoint that did not arrive since a moment is
//! sent again. It is a bulk replay scoped to one endpoint of the account:
//! spread out, audited, and at most one per endpoint in ten minutes.

use std::time::Duration;

use super::bulk::{launch, DEFAULT_WINDOW};
use crate::{
    clock::Timestamp,
    context::Ctx,
    endpoints,
    error::{Error, Result},
    store::{Replay, ReplayCriteria},
};

pub const EVERY: Duration = Duration::from_secs(600);

fn criteria(account_id: &str, endpoint_id: &str, since: Timestamp) -> ReplayCriteria {
    ReplayCriteria {
        failed: true,
        expired: true,
        pending: false,
        since: Some(since.millis()),
        until: None,
        account_id: Some(account_id.to_string()),
        endpoint_id: Some(endpoint_id.to_string()),
        event_type: None,
    }
}

async fn checked(
    ctx: &Ctx,
    account_id: &str,
    endpoint_id: &str,
    since: Timestamp,
) -> Result<ReplayCriteria> {
    endpoints::get(ctx, account_id, endpoint_id).await?;
    if since > ctx.clock.now() {
        return Err(Error::invalid(
            "invalid_since",
            "the start time is in the future",
        ));
    }
    Ok(criteria(account_id, endpoint_id, since))
}

/// How many deliveries a recovery from `since` would send again.
pub async fn preview(
    ctx: &Ctx,
    account_id: &str,
    endpoint_id: &str,
    since: Timestamp,
) -> Result<i64> {
    let c = checked(ctx, account_id, endpoint_id, since).await?;
    Ok(ctx.store.replay_total(&c).await?)
}

/// Sends again, spread over five minutes, every failed or expired
/// delivery to the endpoint created since `since`.
pub async fn recover(
    ctx: &Ctx,
    account_id: &str,
    endpoint_id: &str,
    since: Timestamp,
    actor: &str,
) -> Result<Replay> {
    let c = checked(ctx, account_id, endpoint_id, since).await?;
    let now = ctx.clock.now();
    super::spend(ctx, &format!("recover:{endpoint_id}"), EVERY, 1, now, |s| {
        format!("one recovery per endpoint every 10 minutes; try again in {s} s")
    })
    .await?;
    let (replay, _) = launch(ctx, &c, actor, "recover", DEFAULT_WINDOW, now).await?;
    Ok(replay)
}
