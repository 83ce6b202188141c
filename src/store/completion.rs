//! What one attempt's result does to its delivery row: the record and the
//! transition the engine hands in, and the row it leaves behind, as both
//! backends write it.

use std::collections::HashSet;

use super::{Delivery, DeliveryState, Result, StoreError};
use crate::clock::Timestamp;

/// What one attempt left behind, written together with the delivery's next state.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub attempt: i64,
    pub started_at: i64,
    pub duration_ms: i64,
    pub request_headers: String,
    pub response_status: Option<i64>,
    pub response_headers: Option<String>,
    pub response_body: Option<Vec<u8>>,
    pub error: Option<String>,
    pub classification: String,
}

/// One finished attempt, for `Store::complete_attempts`.
#[derive(Debug, Clone)]
pub struct Completion {
    pub claimed: Delivery,
    pub record: AttemptRecord,
    pub transition: Transition,
    pub now: Timestamp,
}

/// One endpoint that delivered in a batch of results.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Healthy<'a> {
    pub endpoint_id: &'a str,
    /// Its latest success.
    pub at: Timestamp,
    pub delivered: i64,
    /// When the earliest of these attempts started: successes of attempts
    /// already in flight at the last cut of the in-flight cap do not grow
    /// it back (`ENDPOINT_SUCCEEDED`).
    pub first_started: i64,
}

/// Each endpoint that delivered in `written`, in id order (SQLite's one
/// writer cannot deadlock; Postgres groups them in SQL, migration 0038).
pub(super) fn healthy_endpoints<'a>(written: &[&'a Completion]) -> Vec<Healthy<'a>> {
    let mut healthy: Vec<Healthy> = Vec::new();
    for c in written
        .iter()
        .filter(|c| c.transition == Transition::Delivered)
    {
        match healthy
            .iter_mut()
            .find(|h| h.endpoint_id == c.claimed.endpoint_id)
        {
            Some(h) => {
                h.at = h.at.max(c.now);
                h.delivered += 1;
                h.first_started = h.first_started.min(c.record.started_at);
            }
            None => healthy.push(Healthy {
                endpoint_id: &c.claimed.endpoint_id,
                at: c.now,
                delivered: 1,
                first_started: c.record.started_at,
            }),
        }
    }
    healthy.sort_unstable();
    healthy
}

/// `batch` cut before each result for a delivery the part already names:
/// a stale claim's result can share a batch with the live one's (its
/// lease ran out during the attempt and the delivery was claimed again).
/// Each part names a delivery once, so the ids a write answers say which
/// of its results held their claims, and each delivery gets one attempt.
pub(super) fn distinct_runs(batch: &[Completion]) -> Vec<&[Completion]> {
    let mut runs = Vec::new();
    let mut seen = HashSet::new();
    let mut start = 0;
    for (i, c) in batch.iter().enumerate() {
        if !seen.insert(c.claimed.id.as_str()) {
            runs.push(&batch[start..i]);
            start = i;
            seen.clear();
            seen.insert(c.claimed.id.as_str());
        }
    }
    if start < batch.len() {
        runs.push(&batch[start..]);
    }
    runs
}

/// Each result of `batch` answered, given the deliveries its write moved:
/// the row it left behind, or its claim was lost. `batch` names each
/// delivery once (`distinct_runs`).
pub(super) fn answered(batch: &[Completion], moved: &HashSet<String>) -> Vec<Result<Delivery>> {
    batch
        .iter()
        .map(|c| match moved.contains(&c.claimed.id) {
            true => Ok(c.written_row()),
            false => Err(StoreError::LostClaim(c.claimed.id.clone())),
        })
        .collect()
}

/// The delivery row a completion leaves behind.
pub(super) struct Outcome {
    pub state: DeliveryState,
    /// Failed attempts to add (a success does not count).
    pub counted: i64,
    pub next_at: i64,
    pub finished_at: Option<i64>,
}

impl Completion {
    /// The delivery row this completion leaves behind once written, built
    /// here as the database holds it rather than read back: the engine
    /// drops it, and `RETURNING *` had both backends encode and the server
    /// decode every column of every row (by name) for that.
    pub(super) fn written_row(&self) -> Delivery {
        let outcome = self.outcome();
        let (claimed, record) = (&self.claimed, &self.record);
        Delivery {
            state: outcome.state,
            attempts: claimed.attempts + outcome.counted,
            attempt_seq: record.attempt,
            next_attempt_at: outcome.next_at,
            claimed_at: None,
            claim_token: None,
            lease_until: None,
            last_status: record.response_status,
            last_response: record.response_body.clone(),
            last_error: record.error.clone(),
            finished_at: outcome.finished_at,
            updated_at: self.now.millis(),
            ..claimed.clone()
        }
    }

    pub(super) fn outcome(&self) -> Outcome {
        let claimed = &self.claimed;
        let (state, counted, next_at) = match self.transition {
            Transition::Delivered => (DeliveryState::Delivered, 0, claimed.next_attempt_at),
            Transition::Retry { next_attempt_at } => {
                (DeliveryState::Pending, 1, next_attempt_at.millis())
            }
            Transition::Failed => (DeliveryState::Failed, 1, claimed.next_attempt_at),
            Transition::Expired => (DeliveryState::Expired, 1, claimed.next_attempt_at),
        };
        Outcome {
            state,
            counted,
            next_at,
            finished_at: state.is_terminal().then_some(self.now.millis()),
        }
    }
}

/// Where a claimed delivery goes after its attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Delivered,
    Retry { next_attempt_at: Timestamp },
    Failed,
    Expired,
}
