//! Pause, resume and secret rotation, the same for the REST API and the
//! dashboard: one place decides the pause reason, the rotation overlap and
//! that a resume wakes the workers.

mod endpoint_url;
mod lookalike_host;

pub use endpoint_url::{EndpointUrl, MAX_URL_CHARS};

use crate::{
    context::Ctx,
    delivery::signing,
    store::{Endpoint, EndpointState, StoreError},
};

pub async fn pause(ctx: &Ctx, account_id: &str, id: &str) -> Result<Endpoint, StoreError> {
    ctx.store
        .set_endpoint_state(
            account_id,
            id,
            EndpointState::Paused,
            Some("paused by the customer"),
            ctx.clock.now(),
        )
        .await
}

/// What queued while paused goes out at once.
pub async fn resume(ctx: &Ctx, account_id: &str, id: &str) -> Result<Endpoint, StoreError> {
    let e = ctx
        .store
        .resume_endpoint(account_id, id, ctx.clock.now())
        .await?;
    ctx.engine.wake().await;
    Ok(e)
}

/// A new secret; the old one keeps signing for the configured overlap.
pub async fn rotate_secret(ctx: &Ctx, account_id: &str, id: &str) -> Result<Endpoint, StoreError> {
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
}
