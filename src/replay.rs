//! Replay (SPEC §5): a customer's resend of one delivery, and an admin's
//! bulk replay of dead letters.

mod bulk;
mod resend;

pub use bulk::{check, start, DEFAULT_WINDOW, MAX_WINDOW};
pub use resend::{resend, ResendError};
