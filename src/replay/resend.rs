//! Resend one delivery (SPEC §5), the same for the API and the dashboard:
//! only finished deliveries, within the per-endpoint budget, audited.

use std::time::Duration;

use crate::{
    context::Ctx,
    store::{Delivery, StoreError},
};

#[derive(Debug, thiserror::Error)]
pub enum ResendError {
    #[error("delivery not found")]
    NotFound,
    #[error("the delivery is already pending or in flight")]
    NotFinished,
    #[error("at most {limit} resends per minute per endpoint; try again in {retry_after_s} s")]
    RateLimited { limit: i64, retry_after_s: u64 },
    #[error(transparent)]
    Store(StoreError),
}

/// Resends `delivery_id` of `account_id` on behalf of `actor` (for the
/// audit log: "api_key:<id>" or "user:<id>").
pub async fn resend(
    ctx: &Ctx,
    account_id: &str,
    delivery_id: &str,
    actor: &str,
) -> Result<Delivery, ResendError> {
    let now = ctx.clock.now();
    let delivery = ctx
        .store
        .account_delivery(account_id, delivery_id)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => ResendError::NotFound,
            e => ResendError::Store(e),
        })?;
    // Refusing an unfinished delivery must not spend the budget.
    if !delivery.state.is_terminal() {
        return Err(ResendError::NotFinished);
    }
    let limit = ctx.config.resends_per_minute;
    let over = ctx
        .store
        .take_rate_slot(
            &format!("resend:{}", delivery.endpoint_id),
            Duration::from_secs(60),
            limit,
            now,
        )
        .await
        .map_err(ResendError::Store)?;
    if let Some(free_at) = over {
        let wait_ms = (free_at.millis() - now.millis()).max(1);
        let retry_after_s = u64::try_from((wait_ms + 999) / 1000).unwrap_or(60);
        return Err(ResendError::RateLimited {
            limit,
            retry_after_s,
        });
    }
    let give_up = now.plus(ctx.engine.settings().retry_window);
    let updated = ctx
        .store
        .resend_delivery(account_id, delivery_id, actor, give_up, now)
        .await
        .map_err(|e| match e {
            StoreError::Conflict(_) => ResendError::NotFinished,
            StoreError::NotFound => ResendError::NotFound,
            e => ResendError::Store(e),
        })?;
    metrics::counter!("dakghar_resends_total").increment(1);
    ctx.engine.wake().await;
    Ok(updated)
}
