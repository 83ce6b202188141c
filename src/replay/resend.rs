//! Resend one delivery (SPEC §5): finished deliveries, and the waiting
//! ones of a paused endpoint (a fresh retry window, so a paused backlog
//! keeps its promise), within the per-endpoint budget, audited.

use std::time::Duration;

use crate::{
    context::Ctx,
    error::{Error, OrNotFound, Result},
    store::{Delivery, DeliveryState, EndpointState, StoreError},
};

const NOT_FINISHED: &str = "the delivery is already pending or in flight (a waiting delivery can be resent while its endpoint is paused)";

/// Resends `delivery_id` of `account_id` on behalf of `actor` (for the
/// audit log: "api_key:<id>" or "user:<id>").
pub async fn resend(
    ctx: &Ctx,
    account_id: &str,
    delivery_id: &str,
    actor: &str,
) -> Result<Delivery> {
    let now = ctx.clock.now();
    let delivery = ctx
        .store
        .account_delivery(account_id, delivery_id)
        .await
        .or_not_found("delivery")?;
    // Refusing an unfinished delivery must not spend the budget.
    let waiting_while_paused = delivery.state == DeliveryState::Pending
        && ctx
            .store
            .endpoint(account_id, &delivery.endpoint_id)
            .await
            .is_ok_and(|e| e.state == EndpointState::Paused);
    if !delivery.state.is_terminal() && !waiting_while_paused {
        return Err(Error::Conflict(NOT_FINISHED.into()));
    }
    let limit = ctx.config.resends_per_minute;
    let key = format!("resend:{}", delivery.endpoint_id);
    super::spend(ctx, &key, Duration::from_secs(60), limit, now, |s| {
        format!("at most {limit} resends per minute per endpoint; try again in {s} s")
    })
    .await?;
    let give_up = now.plus(ctx.engine.settings().retry_window);
    let updated = match ctx
        .store
        .resend_delivery(account_id, delivery_id, actor, give_up, now)
        .await
    {
        Ok(d) => d,
        // Resent elsewhere since it was read.
        Err(StoreError::Conflict(_)) => return Err(Error::Conflict(NOT_FINISHED.into())),
        Err(StoreError::NotFound) => return Err(Error::NotFound("delivery")),
        Err(e) => return Err(e.into()),
    };
    metrics::counter!("dakghar_resends_total").increment(1);
    ctx.engine.wake().await;
    Ok(updated)
}
