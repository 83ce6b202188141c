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
    /// A delivery's last answer: `404`, `4xx`, `5xx` or `timeout`.
    pub status: Option<String>,
    /// A custom range, from and to, each `YYYY-MM-DD` or
    /// `YYYY-MM-DDTHH:MM` (what a date or datetime-local input sends) on
    /// the wall clock `tz` minutes east of UTC.
    pub from: Option<String>,
    pub to: Option<String>,
    /// The viewer's zone once the page runs; UTC without it.
    pub tz: Option<String>,
    pub cursor: Option<String>,
    /// Paging back: the page just newer than this cursor.
    pub before: Option<String>,
}

impl EventsQuery {
    pub fn is_filtered(&self) -> bool {
        [
            &self.state,
            &self.event_type,
            &self.endpoint,
            &self.range,
            &self.id,
            &self.status,
            &self.from,
            &self.to,
        ]
        .iter()
        .any(|f| f.is_some())
    }

    /// These filters' page just newer than `before`.
    pub fn newer_url(&self, before: &str) -> String {
        self.url_with(None, Some(before))
    }

    /// These filters' page after `cursor` (the first page without one).
    pub fn to_url(&self, cursor: Option<&str>) -> String {
        self.url_with(cursor, None)
    }

    fn url_with(&self, cursor: Option<&str>, before: Option<&str>) -> String {
        let pairs = [
            ("state", self.state.as_deref()),
            ("type", self.event_type.as_deref()),
            ("endpoint", self.endpoint.as_deref()),
            ("range", self.range.as_deref()),
            ("id", self.id.as_deref()),
            ("status", self.status.as_deref()),
            ("from", self.from.as_deref()),
            ("to", self.to.as_deref()),
            (
                "tz",
                self.tz
                    .as_deref()
                    .filter(|_| self.from.is_some() || self.to.is_some()),
            ),
            ("cursor", cursor),
            ("before", before),
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

/// Suggestions for the last-answer filter; any status works too.
pub const ANSWERS: [(&str, &str); 5] = [
    ("4xx", "any 4xx"),
    ("5xx", "any 5xx"),
    ("429", "429 Too Many Requests"),
    ("410", "410 Gone"),
    ("timeout", "no answer in time"),
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
    /// The newer page's cursor, for `before`; none on the newest page.
    pub prev_cursor: Option<String>,
    pub endpoints: Vec<EndpointOption>,
    /// The types the account has sent, for the type filter's suggestions.
    pub event_types: Vec<String>,
    /// Why these filters cannot be read; the list is then empty.
    pub problem: Option<String>,
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
