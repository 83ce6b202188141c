//! The account pages: alert emails, API keys, and the delivery contract.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationView {
    pub id: String,
    pub kind: String,
    pub subject: String,
    pub body: String,
    pub endpoint_id: Option<String>,
    pub created_at: i64,
    pub sent_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyView {
    pub id: String,
    /// The first characters, enough to recognise a key, never to use it.
    pub prefix: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
    /// What it is for; may be empty.
    pub name: String,
    /// To the minute.
    pub last_used_at: Option<i64>,
}

/// The delivery contract as this installation is configured right now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contract {
    pub retry_window: String,
    pub max_attempts: u32,
    pub jitter: String,
    /// `exponential`, `linear` or `fixed`.
    pub retry_strategy: String,
    /// The statuses retried, as configured (`1xx,3xx,…,5xx`).
    pub retry_statuses: String,
    /// Starts per second for endpoints without their own limit; `None` is none.
    pub default_rate_limit: Option<i64>,
    /// Attempts in flight per receiver host; `None` is no cap.
    pub max_in_flight_per_host: Option<i64>,
    pub request_timeout: String,
    pub connect_timeout: String,
    pub rotation_overlap: String,
    pub resends_per_minute: i64,
    /// The wait before each retry: (attempt number, shortest, longest).
    pub schedule: Vec<(u32, String, String)>,
    /// Where this dashboard is served, for the examples.
    pub base_url: String,
    /// The REST API's operations: (method, path, summary), from its OpenAPI document.
    pub api: Vec<(String, String, String)>,
}
