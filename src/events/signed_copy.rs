//! A delivery's request signed afresh, so a customer can send it again by
//! hand (curl) and their verifying receiver accepts it: the stored
//! attempt's signature is minutes or days old, past any receiver's
//! timestamp tolerance.

use crate::{
    context::Ctx,
    delivery::signing,
    endpoints,
    error::{Error, OrNotFound, Result},
};

/// What the request carries, signed at the clock's now.
#[derive(Debug, Clone)]
pub struct SignedCopy {
    pub url: String,
    pub event_id: String,
    pub timestamp: i64,
    pub signature: String,
    pub body: Vec<u8>,
}

/// The request of one of the account's deliveries, signed now with its
/// endpoint's secrets (both during a rotation, as the engine signs).
/// Another account's delivery is not found.
pub async fn signed_copy(ctx: &Ctx, account_id: &str, delivery_id: &str) -> Result<SignedCopy> {
    let now = ctx.clock.now();
    let delivery = ctx
        .store
        .account_delivery(account_id, delivery_id)
        .await
        .or_not_found("delivery")?;
    let event = ctx
        .store
        .event(account_id, &delivery.event_id)
        .await
        .or_not_found("event")?;
    let endpoint = endpoints::get(ctx, account_id, &delivery.endpoint_id).await?;
    let timestamp = now.unix_seconds();
    let signature = signing::signature_header(
        &signing::secrets_of(&endpoint, now),
        &event.id,
        timestamp,
        &event.payload,
    )
    .map_err(|e| Error::Conflict(format!("this endpoint's secret cannot sign: {e}")))?;
    Ok(SignedCopy {
        url: endpoint.url,
        event_id: event.id,
        timestamp,
        signature,
        body: event.payload,
    })
}
