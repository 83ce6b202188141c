//! Replay (SPEC §5): a customer's resend of one delivery or recovery of
//! an endpoint's failures, and an admin's bulk replay of dead letters,
//! with the audit log all of them write to.

mod bulk;
pub mod recover;
mod resend;

pub use bulk::{audit_log, cancel, check, preview, start, status, DEFAULT_WINDOW, MAX_WINDOW};
pub use resend::resend;

use crate::clock::Timestamp;

/// Whole seconds from `now` until a refused budget has room, at least 1.
fn seconds_until(now: Timestamp, free_at: Timestamp) -> u64 {
    let wait_ms = (free_at.millis() - now.millis()).max(1);
    u64::try_from((wait_ms + 999) / 1000).unwrap_or(60)
}
