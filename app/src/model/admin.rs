//! The admin pages: the installation at a glance, bulk replay with preview
//! and progress, and the audit log.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdminOverview {
    /// Delivered share of the attempts in the last hour.
    pub delivery_rate_1h: Option<f64>,
    pub attempts_1h: i64,
    /// Dead-lettered share of the deliveries finished in the last hour.
    pub dead_letter_rate_1h: Option<f64>,
    pub finished_1h: i64,
    pub accounts: Vec<AccountLine>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountLine {
    pub id: String,
    pub name: String,
    pub queued: i64,
    pub dead_letters: i64,
    pub failing_endpoints: i64,
}

/// The replay form as typed: checkboxes, dates (UTC days) and a window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayForm {
    #[serde(default)]
    pub failed: Option<String>,
    #[serde(default)]
    pub expired: Option<String>,
    /// Waiting deliveries, for a fresh retry window.
    #[serde(default)]
    pub pending: Option<String>,
    /// `YYYY-MM-DD`, from the start of that day (UTC).
    #[serde(default)]
    pub since: String,
    /// `YYYY-MM-DD`, up to the end of that day (UTC).
    #[serde(default)]
    pub until: String,
    #[serde(default)]
    pub account_id: String,
    #[serde(default)]
    pub endpoint_id: String,
    #[serde(default)]
    pub event_type: String,
    /// A duration such as `5m`; empty means 5 minutes.
    #[serde(default)]
    pub window: String,
}

impl ReplayForm {
    pub fn is_empty(&self) -> bool {
        self.failed.is_none() && self.expired.is_none() && self.pending.is_none()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewLine {
    pub account_name: String,
    pub endpoint_id: String,
    pub endpoint_url: String,
    pub count: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayView {
    pub id: String,
    pub actor: String,
    pub kind: String,
    pub criteria: String,
    pub count: i64,
    pub status: String,
    pub created_at: i64,
    pub pending: i64,
    pub in_flight: i64,
    pub delivered: i64,
    pub failed: i64,
    pub expired: i64,
}

impl ReplayView {
    /// Still moving: the progress page keeps refreshing while it is.
    pub fn is_active(&self) -> bool {
        self.status == "running" && self.pending + self.in_flight > 0
    }
}
