//! Ingest's writes in groups: events that arrive at about the same time
//! share one transaction (`Ingester`; a commit per event held Postgres to
//! ~400 events/s at a fan-out of 10). The backends write the rows
//! (`postgres.rs` as arrays, `sqlite.rs` in multi-row statements); what is
//! new and where it goes is decided here, once.

use std::{
    borrow::Borrow,
    collections::{HashMap, HashSet},
    sync::Arc,
};

use super::{
    claim_rules::ClaimRules, group_commit::GroupCommit, Claim, Delivery, DeliveryState, Event,
    InsertedEvent, NewEvent, Result, Store, StoreError,
};
use crate::{clock::Timestamp, ids};

/// One event to store, with what its ingest decided.
pub struct NewIngest {
    pub event: NewEvent,
    /// The one endpoint it goes to whatever its filter (the test event).
    pub only: Option<String>,
    pub now: Timestamp,
    pub give_up_at: Timestamp,
    /// The ingest span's `traceparent`, when traces are exported.
    pub traceparent: Option<String>,
    /// The API key the producer sent, when this node did not look it up
    /// for this event (`accounts::producer`): the write stores the event
    /// only if the key is still active, and answers `KeyRevoked` if not.
    pub key_id: Option<String>,
}

/// A new delivery as a claim at `now` leases it.
pub(super) fn in_flight(
    d: &Delivery,
    now: Timestamp,
    lease_until: Timestamp,
    token: &str,
) -> Delivery {
    Delivery {
        state: DeliveryState::InFlight,
        claimed_at: Some(now.millis()),
        lease_until: Some(lease_until.millis()),
        claim_token: Some(token.to_string()),
        updated_at: now.millis(),
        ..d.clone()
    }
}

/// The keys a batch's events must find active, each once.
pub(super) fn keys<B: Borrow<NewIngest>>(batch: &[B]) -> Vec<String> {
    let mut ids: Vec<String> = batch
        .iter()
        .filter_map(|n| n.borrow().key_id.clone())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Whether the write may store `item`, given the keys it found active.
fn keyed(item: &NewIngest, active: &HashSet<String>) -> bool {
    item.key_id.as_ref().is_none_or(|k| active.contains(k))
}

/// What ingest needs of an endpoint that may receive an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    pub id: String,
    pub account_id: String,
    /// Its event types, read once; empty means every type.
    filter: Vec<String>,
}

impl Target {
    /// `event_types` as the endpoint's column holds it (a JSON array).
    pub fn new(id: String, account_id: String, event_types: &str) -> Target {
        Target {
            id,
            account_id,
            filter: serde_json::from_str(event_types).unwrap_or_default(),
        }
    }

    fn wants(&self, event_type: &str) -> bool {
        super::models::wants(&self.filter, event_type)
    }
}

/// The accounts a batch ingests for, each once.
pub(super) fn accounts<B: Borrow<NewIngest>>(batch: &[B]) -> Vec<String> {
    let mut ids: Vec<String> = batch
        .iter()
        .map(|n| n.borrow().event.account_id.clone())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// What the batch leaves behind, given the `(account_id, id)` of the
/// events the insert kept, the keys it found active and the accounts'
/// endpoints in fan-out order.
/// The rows are built here as the database will hold them, so each is
/// written once and never read back.
pub(super) fn fan_out<B: Borrow<NewIngest>>(
    batch: &[B],
    kept: &[(String, String)],
    active: &HashSet<String>,
    endpoints: &[&Target],
) -> Vec<Result<InsertedEvent>> {
    let mut new: HashSet<(&str, &str)> = kept
        .iter()
        .map(|(a, id)| (a.as_str(), id.as_str()))
        .collect();
    batch
        .iter()
        .map(|item| {
            let item = item.borrow();
            let e = &item.event;
            if !keyed(item, active) {
                return Err(StoreError::KeyRevoked);
            }
            // Only the first of the batch's same ids was inserted.
            if !new.remove(&(e.account_id.as_str(), e.id.as_str())) {
                return Err(StoreError::Conflict("an event with this id"));
            }
            let at = item.now.millis();
            let deliveries = endpoints
                .iter()
                .filter(|ep| ep.account_id == e.account_id)
                .filter(|ep| match &item.only {
                    Some(id) => &ep.id == id,
                    None => ep.wants(&e.event_type),
                })
                .map(|ep| Delivery {
                    id: ids::new_sorted_id(ids::DELIVERY, item.now),
                    account_id: e.account_id.clone(),
                    event_id: e.id.clone(),
                    endpoint_id: ep.id.clone(),
                    state: DeliveryState::Pending,
                    attempts: 0,
                    attempt_seq: 0,
                    next_attempt_at: at,
                    give_up_at: item.give_up_at.millis(),
                    claimed_at: None,
                    claim_token: None,
                    lease_until: None,
                    last_status: None,
                    last_response: None,
                    last_error: None,
                    finished_at: None,
                    created_at: at,
                    updated_at: at,
                })
                .collect();
            Ok(InsertedEvent {
                event: Event {
                    account_id: e.account_id.clone(),
                    id: e.id.clone(),
                    event_type: e.event_type.clone(),
                    payload: e.payload.clone(),
                    created_at: at,
                    traceparent: item.traceparent.clone(),
                },
                deliveries,
                nothing_left_due: false,
            })
        })
        .collect()
}

/// `fan_out` before the write knows what it kept: every event of the
/// batch as if new (a repeated id within the batch still only once) and
/// its keys active.
pub(super) fn fan_out_planned<B: Borrow<NewIngest>>(
    batch: &[B],
    endpoints: &[&Target],
) -> Vec<Result<InsertedEvent>> {
    let all: Vec<(String, String)> = batch
        .iter()
        .map(|n| n.borrow())
        .map(|n| (n.event.account_id.clone(), n.event.id.clone()))
        .collect();
    fan_out(batch, &all, &keys(batch).into_iter().collect(), endpoints)
}

/// A planned fan-out as the write left it: events whose key it found
/// revoked were refused, others it did not keep (their id was taken) are
/// conflicts, and of the rest only the deliveries it made remain (an
/// endpoint deleted or disabled meanwhile got none).
pub(super) fn as_written<B: Borrow<NewIngest>>(
    batch: &[B],
    planned: Vec<Result<InsertedEvent>>,
    kept: &HashSet<(String, String)>,
    active: &HashSet<String>,
    made: &HashSet<String>,
) -> Vec<Result<InsertedEvent>> {
    batch
        .iter()
        .zip(planned)
        .map(|(item, r)| {
            if !keyed(item.borrow(), active) {
                return Err(StoreError::KeyRevoked);
            }
            let mut inserted = r?;
            let key = (inserted.event.account_id.clone(), inserted.event.id.clone());
            if !kept.contains(&key) {
                return Err(StoreError::Conflict("an event with this id"));
            }
            inserted.deliveries.retain(|d| made.contains(&d.id));
            Ok(inserted)
        })
        .collect()
}

/// Every delivery the batch creates, in order.
pub(super) fn new_deliveries(results: &[Result<InsertedEvent>]) -> Vec<&Delivery> {
    results
        .iter()
        .flatten()
        .flat_map(|i| &i.deliveries)
        .collect()
}

/// The most events one transaction carries.
const MAX_GROUP: usize = 256;

/// Stores ingested events, a group per transaction.
#[derive(Debug, Clone)]
pub struct Ingester(GroupCommit<NewIngest, InsertedEvent>);

/// This node's workers, as an ingest group sees them: the group's own
/// transaction leases what it made due and hands it to them. Otherwise
/// each group's commit woke a claim loop whose claim was one more
/// transaction (on SQLite for the one writer), about one an event at low
/// load, and the first attempt waited for it; on Postgres each new row
/// also went through the pending partition and its indexes first.
pub trait Workers: Send + Sync {
    /// Room for the deliveries a group makes, and the terms of their
    /// lease; `None` when the workers are stopped or their room is full.
    fn offer(&self) -> Option<LeaseOffer>;
    /// What the group leased, committed: the workers attempt it. The
    /// offer's room it did not use goes back.
    fn take(self: Arc<Self>, leased: Claim, offer: LeaseOffer);
}

/// Room in a node's workers for deliveries an ingest group leases.
#[derive(Debug)]
pub struct LeaseOffer {
    pub terms: LeaseTerms,
    /// A permit of the node's room per delivery the group may lease.
    pub room: tokio::sync::OwnedSemaphorePermit,
}

/// What an ingest group may lease, as a claim would at `now`: at most
/// `limit` due deliveries, of the endpoints it made deliveries for, and
/// of each at most one more than it made (the one more, when there is
/// none, says no older work waits there). Also the terms of a claim.
#[derive(Debug, Clone, Copy)]
pub struct LeaseTerms {
    pub now: Timestamp,
    pub lease_until: Timestamp,
    pub limit: i64,
    pub rules: ClaimRules,
}

impl Ingester {
    /// Starts the writer task; it ends once every `Ingester` is dropped.
    /// `workers`, if given, are this node's: each group leases what they
    /// offer room for.
    pub fn start(store: Store, workers: Option<Arc<dyn Workers>>) -> Ingester {
        // No linger: the producer waits for the commit, and so does the
        // first attempt.
        Ingester(GroupCommit::start(
            MAX_GROUP,
            None,
            "events",
            Box::new(move |group| {
                let (store, workers) = (store.clone(), workers.clone());
                Box::pin(async move {
                    let Some((workers, offer)) =
                        workers.and_then(|w| w.offer().map(|offer| (w, offer)))
                    else {
                        return store.insert_events(group).await;
                    };
                    match store.insert_events_leasing(group, Some(offer.terms)).await {
                        Ok((inserted, leased)) => {
                            workers.take(leased, offer);
                            Ok(inserted)
                        }
                        // The database itself (locked, unreachable): the
                        // same write without the lease would wait as long
                        // again before the producer hears it.
                        Err(e) if e.is_unavailable() => Err(e),
                        // The events come first: a lease that fails must
                        // not refuse them too (a row that will not decode
                        // is handed back, not failed; see the SQLite
                        // store). The claim loops meet the same fault and
                        // back off on their own.
                        Err(e) => {
                            tracing::warn!(error = %e, "an ingest group failed with its lease; writing it once more without");
                            drop(offer);
                            store.insert_events(group).await
                        }
                    }
                })
            }),
        ))
    }

    /// Stores one event; returns once it is committed.
    pub async fn insert(&self, new: NewIngest) -> Result<InsertedEvent> {
        // The writer is gone only when the node shuts down: try again
        // elsewhere, as with the database unreachable.
        self.0
            .write(new)
            .await
            .unwrap_or(Err(StoreError::Database(sqlx::Error::PoolClosed)))
    }
}

/// What a group leased, told to its answers and its claim: each delivery
/// of the group it leased is in flight in the answer, and the event of
/// each is in hand for the attempt (`ReadAlong`; the store read every
/// leased delivery's endpoint along). A leased delivery the group did
/// not make (an older one was due first) has its event read as usual.
/// Each answer says whether the lease left anything due.
pub(super) fn leased_in_group(inserted: &mut [Result<InsertedEvent>], claim: &mut Claim) {
    let leased: HashMap<&str, &Delivery> = claim
        .deliveries
        .iter()
        .map(|d| (d.id.as_str(), d))
        .collect();
    for i in inserted.iter_mut().flatten() {
        i.nothing_left_due = claim.drained;
        for d in &mut i.deliveries {
            if let Some(held) = leased.get(d.id.as_str()) {
                *d = Delivery::clone(held);
                claim
                    .read_along
                    .events
                    .insert(d.id.clone(), i.event.clone());
            }
        }
    }
}
