//! Ingest's writes in groups: events that arrive at about the same time
//! share one transaction (`Ingester`). Under load the groups grow by
//! themselves (a commit per event held Postgres to ~400 events/s at a
//! fan-out of 10); when idle each event is written the moment it arrives.
//! The backends write the rows (`postgres.rs` as arrays, `sqlite.rs` a
//! statement each); what is new and where it goes is decided here, once.

use std::collections::HashSet;

use tokio::sync::{mpsc, oneshot};

use super::{
    Delivery, DeliveryState, Endpoint, Event, InsertedEvent, NewEvent, Result, Store, StoreError,
};
use crate::{clock::Timestamp, ids};

/// One event to store, with what its ingest decided.
pub struct NewIngest {
    pub event: NewEvent,
    /// The one endpoint it goes to whatever its filter (the test event).
    pub only: Option<String>,
    pub now: Timestamp,
    pub give_up_at: Timestamp,
}

/// The accounts a batch ingests for, each once.
pub(super) fn accounts(batch: &[NewIngest]) -> Vec<String> {
    let mut ids: Vec<String> = batch.iter().map(|n| n.event.account_id.clone()).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// What the batch leaves behind, given the `(account_id, id)` of the
/// events the insert kept and the accounts' endpoints in fan-out order.
/// The rows are built here as the database will hold them, so each is
/// written once and never read back.
pub(super) fn fan_out(
    batch: &[NewIngest],
    kept: &[(String, String)],
    endpoints: &[Endpoint],
) -> Vec<Result<InsertedEvent>> {
    let mut new: HashSet<(&str, &str)> = kept
        .iter()
        .map(|(a, id)| (a.as_str(), id.as_str()))
        .collect();
    batch
        .iter()
        .map(|item| {
            let e = &item.event;
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
                    id: ids::new_id(ids::DELIVERY),
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
                },
                deliveries,
            })
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
const MAX_BATCH: usize = 256;

type Reply = oneshot::Sender<Result<InsertedEvent>>;

#[derive(Debug, Clone)]
pub struct Ingester {
    queue: mpsc::UnboundedSender<(NewIngest, Reply)>,
}

impl Ingester {
    /// Starts the writer task; it ends once every `Ingester` is dropped.
    pub fn start(store: Store) -> Ingester {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_batches(store, rx));
        Ingester { queue }
    }

    /// Stores one event; returns once it is committed.
    pub async fn insert(&self, new: NewIngest) -> Result<InsertedEvent> {
        let (reply, answer) = oneshot::channel();
        self.queue.send((new, reply)).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// The writer is gone only when the node shuts down: try again elsewhere.
fn stopped() -> StoreError {
    StoreError::Database(sqlx::Error::PoolClosed)
}

async fn write_batches(store: Store, mut rx: mpsc::UnboundedReceiver<(NewIngest, Reply)>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let (items, replies): (Vec<_>, Vec<_>) = batch.drain(..).unzip();
        if items.len() > 1 {
            if let Ok(answers) = store.insert_events(&items).await {
                for (reply, answer) in replies.into_iter().zip(answers) {
                    let _ = reply.send(answer);
                }
                continue;
            }
            // Nothing of the group was written. One event's fault (an
            // account deleted meanwhile, say) must not fail the others:
            // each is tried on its own and answers for itself.
        }
        for (item, reply) in items.into_iter().zip(replies) {
            let answer = match store.insert_events(std::slice::from_ref(&item)).await {
                Ok(mut one) => one.pop().unwrap_or_else(|| Err(stopped())),
                Err(e) => Err(e),
            };
            let _ = reply.send(answer);
        }
    }
}
