//! What the endpoints pages show: health at a glance, and per endpoint the
//! numbers, the chart, recent errors and the waiting queue.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointSummary {
    pub id: String,
    pub url: String,
    pub description: String,
    /// Empty: every event type.
    pub event_types: Vec<String>,
    pub condition: Condition,
    /// Attempts and successes in the last 24 hours.
    pub attempts_24h: i64,
    pub delivered_24h: i64,
    pub last_attempt: Option<LastAttempt>,
}

impl EndpointSummary {
    /// Whole percent, or `None` with nothing to measure.
    pub fn success_rate_24h(&self) -> Option<i64> {
        percent(self.delivered_24h, self.attempts_24h)
    }
}

pub fn percent(part: i64, whole: i64) -> Option<i64> {
    (whole > 0).then(|| (part * 100 + whole / 2) / whole)
}

/// The one line that says whether an endpoint is well.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Condition {
    Healthy,
    Failing { since: i64 },
    CircuitOpen { until: i64 },
    Paused { reason: Option<String> },
    Disabled,
}

impl Condition {
    pub fn label(&self) -> String {
        match self {
            Condition::Healthy => "active".into(),
            Condition::Failing { .. } => "failing".into(),
            Condition::CircuitOpen { .. } => "circuit open".into(),
            Condition::Paused { .. } => "paused".into(),
            Condition::Disabled => "disabled".into(),
        }
    }

    pub fn class(&self) -> &'static str {
        match self {
            Condition::Healthy => "badge delivered",
            Condition::Failing { .. } => "badge retrying",
            Condition::CircuitOpen { .. } => "badge failed",
            Condition::Paused { .. } | Condition::Disabled => "badge expired",
        }
    }

    pub fn is_paused(&self) -> bool {
        matches!(self, Condition::Paused { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastAttempt {
    pub at: i64,
    pub status: Option<i64>,
    pub delivered: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointDetail {
    pub now: i64,
    pub summary: EndpointSummary,
    /// The limit in force, `None` for none.
    pub rate_limit_per_sec: Option<i64>,
    /// Whether that is the installation's default, not the endpoint's own.
    pub rate_limit_is_default: bool,
    pub max_in_flight: i64,
    /// How many may be in flight now: lowered while the receiver shows
    /// overload, at most `max_in_flight`.
    pub in_flight_cap: i64,
    /// While a 429/503 holds the endpoint's deliveries: until when, and
    /// the status that asked.
    pub throttled_until: Option<i64>,
    pub throttle_status: Option<i64>,
    /// A fault on Dakghar's side holding the deliveries: what, and since.
    pub fault: Option<(String, i64)>,
    pub attempts_7d: i64,
    pub delivered_7d: i64,
    pub avg_ms_24h: Option<i64>,
    pub p95_ms_24h: Option<i64>,
    /// 24 hours, oldest first: (hour start, delivered, not delivered).
    pub hourly: Vec<(i64, i64, i64)>,
    /// Attempt durations in those 24 hours, oldest first.
    pub latency_hourly: Vec<LatencyPoint>,
    /// Per UTC day of the last 7, today last.
    pub latency_daily: Vec<LatencyPoint>,
    pub last_errors: Vec<ErrorLine>,
    pub pending: i64,
    pub in_flight: i64,
    /// Until when the previous secret still signs, after a rotation.
    pub previous_secret_until: Option<i64>,
}

/// Percentiles of the attempts that started in an hour or a day; `None`
/// with none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyPoint {
    pub start: i64,
    pub p50_ms: Option<i64>,
    pub p95_ms: Option<i64>,
}

/// What a resume found waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resumed {
    /// Deliveries that drain now.
    pub waiting: i64,
    /// Deliveries whose window passed while paused: expired, not sent.
    pub past_window: i64,
}

impl Resumed {
    pub fn words(&self) -> String {
        let waiting = crate::format::deliveries(self.waiting);
        let mut out = format!("Resumed: {waiting} waiting now drain");
        if self.past_window > 0 {
            out.push_str(&format!(
                "; {} passed their retry window while paused and expired (resend or replay them if you still want them)",
                crate::format::count(self.past_window)
            ));
        }
        out.push('.');
        out
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorLine {
    pub at: i64,
    pub event_id: String,
    pub status: Option<i64>,
    pub explanation: String,
    pub error: Option<String>,
}

/// "Recover failed since…" as typed: a wall-clock time and its zone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoverForm {
    /// `2026-11-30T20:05`, as `<input type="datetime-local">` sends it.
    pub since: String,
    /// Minutes east of UTC of that wall clock: the viewer's zone once the
    /// page runs, 0 (UTC) without JavaScript.
    #[serde(default)]
    pub offset: String,
}

/// What a recovery from `since` would send again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoverPreview {
    pub since: i64,
    pub count: i64,
}

/// The endpoint form's fields as typed, to add one or change one; the
/// server validates them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointForm {
    pub url: String,
    pub description: String,
    /// Comma- or space-separated; empty means every type.
    pub event_types: String,
    pub rate_limit_per_sec: String,
    pub max_in_flight: String,
}
