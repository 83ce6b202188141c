//! Replay (SPEC §5): a customer's resend of one delivery or recovery of
//! an endpoint's failures, and an admin's bulk replay of dead letters,
//! with the audit log all of them write to.

mod bulk;
pub mod recover;
mod resend;

use std::time::Duration;

pub use bulk::{audit_log, cancel, check, preview, start, status, DEFAULT_WINDOW, MAX_WINDOW};
pub use resend::resend;

use crate::{
    clock::Timestamp,
    context::Ctx,
    error::{Error, Result},
};

/// Takes one of `limit` slots of `key`'s budget per `window`. Refused,
/// the error says in `refusal(seconds)` how long until there is room
/// (whole seconds, at least 1), and carries it for `Retry-After`.
async fn spend(
    ctx: &Ctx,
    key: &str,
    window: Duration,
    limit: i64,
    now: Timestamp,
    refusal: impl FnOnce(u64) -> String,
) -> Result<()> {
    let Some(free_at) = ctx.store.take_rate_slot(key, window, limit, now).await? else {
        return Ok(());
    };
    let wait_ms = (free_at.millis() - now.millis()).max(1);
    let retry_after_s = u64::try_from((wait_ms + 999) / 1000).unwrap_or(60);
    Err(Error::RateLimited {
        message: refusal(retry_after_s),
        retry_after_s,
    })
}
