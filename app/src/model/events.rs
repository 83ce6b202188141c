//! What the events pages show: the list with its filters, one event with
//! its deliveries and their attempt timelines.

use serde::{Deserialize, Serialize};

/// The list's filters, exactly as they appear in the page's URL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsQuery {
    pub state: Option<String>,
    pub event_type: Option<String>,
    pub endpoint: Option<String>,
    /// A preset: `1h`, `24h`, `7d` or `30d`; none means any time.
    pub range: Option<String>,
    /// An exact event id.
    pub id: Option<String>,
    pub cursor: Option<String>,
}

impl EventsQuery {
    pub fn is_filtered(&self) -> bool {
        [
            &self.state,
            &self.event_type,
            &self.endpoint,
            &self.range,
            &self.id,
        ]
        .iter()
        .any(|f| f.is_some())
    }

    /// The query string for these filters (without the cursor) plus `extra`.
    pub fn to_url(&self, cursor: Option<&str>) -> String {
        let pairs = [
            ("state", self.state.as_deref()),
            ("type", self.event_type.as_deref()),
            ("endpoint", self.endpoint.as_deref()),
            ("range", self.range.as_deref()),
            ("id", self.id.as_deref()),
            ("cursor", cursor),
        ];
        let query: Vec<String> = pairs
            .iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k}={}", encode(v))))
            .collect();
        if query.is_empty() {
            "/events".to_string()
        } else {
            format!("/events?{}", query.join("&"))
        }
    }
}

/// Percent-encodes everything but unreserved characters.
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub const RANGES: [(&str, &str); 4] = [
    ("1h", "Last hour"),
    ("24h", "Last 24 hours"),
    ("7d", "Last 7 days"),
    ("30d", "Last 30 days"),
];

pub const STATES: [(&str, &str); 5] = [
    ("pending", "Pending"),
    ("in_flight", "In flight"),
    ("delivered", "Delivered"),
    ("failed", "Failed"),
    ("expired", "Expired"),
];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointOption {
    pub id: String,
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsList {
    /// The server's clock when this was read, for "3 min ago".
    pub now: i64,
    pub rows: Vec<EventRow>,
    pub next_cursor: Option<String>,
    pub endpoints: Vec<EndpointOption>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRow {
    pub id: String,
    pub event_type: String,
    pub created_at: i64,
    pub deliveries: Vec<DeliveryBadge>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryBadge {
    /// The endpoint's description, else its host and path: three endpoints
    /// on one host must read differently.
    pub endpoint_name: String,
    pub endpoint_url: String,
    pub status: Status,
}

/// A delivery's state as customers read it: `pending` splits into
/// "pending" (never tried) and "retrying" (tried and failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Pending,
    Retrying,
    InFlight,
    Delivered,
    Failed,
    Expired,
}

impl Status {
    pub fn from_state(state: &str, failed_attempts: i64) -> Status {
        match state {
            "pending" if failed_attempts > 0 => Status::Retrying,
            "in_flight" => Status::InFlight,
            "delivered" => Status::Delivered,
            "failed" => Status::Failed,
            "expired" => Status::Expired,
            _ => Status::Pending,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Retrying => "retrying",
            Status::InFlight => "in flight",
            Status::Delivered => "delivered",
            Status::Failed => "failed",
            Status::Expired => "expired",
        }
    }

    /// The badge's CSS class.
    pub fn class(self) -> &'static str {
        match self {
            Status::Pending => "badge pending",
            Status::Retrying => "badge retrying",
            Status::InFlight => "badge in-flight",
            Status::Delivered => "badge delivered",
            Status::Failed => "badge failed",
            Status::Expired => "badge expired",
        }
    }

    /// Still moving: the page keeps itself up to date while any is.
    pub fn is_active(self) -> bool {
        matches!(self, Status::Pending | Status::Retrying | Status::InFlight)
    }

    pub fn can_resend(self) -> bool {
        matches!(self, Status::Delivered | Status::Failed | Status::Expired)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventDetail {
    /// The server's clock when this was read, for "next attempt in 4 min".
    pub now: i64,
    pub id: String,
    pub event_type: String,
    pub created_at: i64,
    /// Exactly the bytes every endpoint received (the page re-indents a
    /// copy for reading, never this).
    pub payload: String,
    pub deliveries: Vec<DeliveryDetail>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryDetail {
    pub id: String,
    pub endpoint_id: String,
    pub endpoint_name: String,
    pub endpoint_url: String,
    pub status: Status,
    pub next_attempt_at: Option<i64>,
    pub give_up_at: i64,
    pub finished_at: Option<i64>,
    pub last_error: Option<String>,
    /// Its endpoint is paused: a waiting delivery can be resent for a
    /// fresh retry window.
    #[serde(default)]
    pub endpoint_paused: bool,
    /// Newest first.
    pub attempts: Vec<AttemptView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptView {
    pub number: i64,
    pub started_at: i64,
    pub duration_ms: i64,
    pub status: Option<i64>,
    pub error: Option<String>,
    pub explanation: String,
    pub request_headers: Vec<(String, String)>,
    pub response_headers: Vec<(String, String)>,
    pub response_snippet: Option<String>,
    /// Reproduces the request with a signature placeholder, never the
    /// secret; roles that may see secrets get a signed one on request.
    pub curl: String,
}
