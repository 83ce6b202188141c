//! Replay (SPEC §5): a customer's resend of one delivery, and an admin's
//! bulk replay of dead letters, with the audit log both write to.

mod bulk;
mod resend;

pub use bulk::{audit_log, cancel, check, preview, start, status, DEFAULT_WINDOW, MAX_WINDOW};
pub use resend::resend;
