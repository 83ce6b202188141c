//! Group commit for attempt results (`store::GroupCommit`): attempts that
//! finish at about the same time share one transaction. One commit per
//! batch is most of what makes the engine fast.

use super::error::DeliveryError;
use crate::store::{Completion, Delivery, GroupCommit, Store, StoreError};

/// The most results one transaction carries.
const MAX_BATCH: usize = 256;

#[derive(Debug, Clone)]
pub struct Recorder(GroupCommit<Completion, Delivery>);

impl Recorder {
    /// Starts the writer task; it ends once every `Recorder` is dropped.
    pub fn start(store: Store) -> Recorder {
        Recorder(GroupCommit::start(
            MAX_BATCH,
            "attempt results",
            Box::new(move |batch| {
                let store = store.clone();
                Box::pin(async move { store.complete_attempts(batch).await })
            }),
        ))
    }

    /// Records one attempt; returns once it is committed. Its request was
    /// sent, so a result that cannot be written is a fault of ours.
    pub async fn complete(&self, completion: Completion) -> Result<Delivery, DeliveryError> {
        let answer = crate::metrics::timed("dakghar_db_record_seconds", self.0.write(completion))
            .await
            .ok_or(DeliveryError::RecorderStopped)?;
        answer.map_err(|e| match e {
            StoreError::LostClaim(_) => DeliveryError::Store(e),
            e => DeliveryError::Record(e),
        })
    }
}
