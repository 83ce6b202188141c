//! The delivery engine's pure rules: how attempts are classified, how long
//! to wait, what `Retry-After` means, and how requests are signed.

mod attempt;
pub mod backoff;
mod claim_loop;
pub mod classify;
mod endpoint_health;
pub mod engine;
pub mod recorder;
pub mod request;
pub mod retry_after;
pub mod settings;
pub mod signing;
pub mod target_policy;
