//! The knobs of the delivery engine (SPEC §9), with the documented defaults.

use std::time::Duration;

use super::{backoff::Backoff, retry_statuses::RetryStatuses, target_policy::TargetPolicy};
use crate::store::ClaimRules;

/// Generous but finite (chapter 000): a receiver never sees more starts a
/// second from one endpoint unless the endpoint says so.
pub const DEFAULT_RATE_LIMIT: i64 = 50;
/// Chapter 000's "per-host semaphore": ten attempts at once is plenty for
/// an ordinary receiver; raise it for a hot one.
pub const DEFAULT_MAX_IN_FLIGHT_PER_HOST: i64 = 10;

#[derive(Debug, Clone)]
pub struct DeliverySettings {
    pub backoff: Backoff,
    /// The statuses that are retried unless an endpoint says otherwise.
    pub retry_statuses: RetryStatuses,
    pub retry_window: Duration,
    pub max_attempts: u32,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// How long a claim is held; longer than any request can take.
    pub lease: Duration,
    pub workers: usize,
    pub batch_size: i64,
    /// How often idle workers look for due retries without being woken.
    pub poll_interval: Duration,
    /// Consecutive transient failures that open an endpoint's circuit.
    pub circuit_threshold: i64,
    pub circuit_base_cooldown: Duration,
    pub circuit_max_cooldown: Duration,
    /// Permanent failures in a row that pause an endpoint as dead.
    pub dead_streak: i64,
    /// No success for this long while deliveries dead-letter pauses it too.
    pub dead_after: Duration,
    /// How long in-flight attempts may finish after a shutdown signal.
    pub shutdown_grace: Duration,
    /// The old secret keeps signing this long after a rotation.
    pub rotation_overlap: Duration,
    /// Body bytes kept per attempt; read at most `response_read_cap`.
    pub response_keep: usize,
    pub response_read_cap: usize,
    /// Which addresses endpoints may reach (the SSRF guard).
    pub targets: TargetPolicy,
    /// `--egress-proxy`: every request goes through this proxy, which must
    /// enforce egress rules itself. Environment proxies are never used.
    pub egress_proxy: Option<url::Url>,
    /// Starts per second for endpoints without a limit of their own;
    /// `None` is unlimited.
    pub default_rate_limit: Option<i64>,
    /// Attempts in flight to one receiver (`host:port`) across every
    /// endpoint and account; `None` is unlimited.
    pub max_in_flight_per_host: Option<i64>,
}

impl DeliverySettings {
    /// The limits every claim applies besides each endpoint's own.
    pub fn claim_rules(&self) -> ClaimRules {
        ClaimRules {
            default_rate: self.default_rate_limit.unwrap_or(0),
            host_cap: self.max_in_flight_per_host.unwrap_or(0),
        }
    }
}

impl Default for DeliverySettings {
    fn default() -> Self {
        DeliverySettings {
            backoff: Backoff::default(),
            retry_statuses: RetryStatuses::default(),
            retry_window: Duration::from_secs(72 * 3600),
            max_attempts: 16,
            request_timeout: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(5),
            lease: Duration::from_secs(300),
            workers: 4,
            batch_size: 100,
            poll_interval: Duration::from_secs(1),
            circuit_threshold: 5,
            circuit_base_cooldown: Duration::from_secs(30),
            circuit_max_cooldown: Duration::from_secs(3600),
            dead_streak: 100,
            dead_after: Duration::from_secs(24 * 3600),
            shutdown_grace: Duration::from_secs(10),
            rotation_overlap: Duration::from_secs(24 * 3600),
            response_keep: 512,
            response_read_cap: 16 * 1024,
            targets: TargetPolicy::default(),
            egress_proxy: None,
            default_rate_limit: Some(DEFAULT_RATE_LIMIT),
            max_in_flight_per_host: Some(DEFAULT_MAX_IN_FLIGHT_PER_HOST),
        }
    }
}
