//! The delivery engine's pure rules: how attempts are classified, how long
//! to wait, what `Retry-After` means, and how requests are signed.

pub mod backoff;
pub mod classify;
pub mod engine;
pub mod recorder;
pub mod request;
pub mod retry_after;
pub mod settings;
pub mod signing;
pub mod target_policy;
