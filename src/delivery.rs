//! The delivery engine (SPEC §4): the embedded workers that claim due
//! deliveries, sign and send them, and decide what comes next.
//!
//! - `engine`, `claim_loop`, `attempt`: the workers themselves;
//! - `decision`: what an attempt's answer means for the delivery, a pure
//!   function with a test per rule;
//! - `endpoint_health`: the circuit breaker and dead endpoints;
//! - `classify`, `backoff`, `retry_after`, `signing`, `request`,
//!   `target_policy` (the SSRF guard), `recorder` (group commit): the
//!   parts they use.

mod attempt;
pub mod backoff;
mod claim_loop;
pub mod classify;
pub mod decision;
pub mod endpoint_health;
pub mod engine;
pub mod error;
mod leased_at_ingest;
pub mod recorder;
pub mod request;
pub mod retry_after;
pub mod retry_statuses;
pub mod settings;
pub mod signing;
pub mod target_policy;
pub mod throttle;

pub use engine::Engine;
pub use error::DeliveryError;
