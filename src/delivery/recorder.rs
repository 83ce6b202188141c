//! Group commit for attempt results (`store::GroupCommit`): attempts that
//! finish at about the same time share one transaction. One commit per
//! batch is most of what makes the engine fast.

use super::error::DeliveryError;
use crate::store::{Completion, Delivery, GroupCommit, Linger, Store, StoreError};

/// The most results one transaction carries.
const MAX_BATCH: usize = 256;

/// The longest a short group of results waits for the results of attempts
/// still under way. A result is on the way of no first attempt (the
/// receiver already has it); what waits is the dashboard, and the slot:
/// an endpoint at its cap with work queued sends its next attempt up to
/// this much later. At 10 % load a result call carried 1.3 results for
/// 0.4 ms of Postgres, most of it the call's own cost whatever its size.
/// (`dakghar_db_record_seconds` includes the wait.)
const LINGER: std::time::Duration = std::time::Duration::from_millis(2);

#[derive(Debug, Clone)]
pub struct Recorder(GroupCommit<Completion, Delivery>);

impl Recorder {
    /// Starts the writer task; it ends once every `Recorder` is dropped.
    /// `under_way` counts the attempts whose tasks have not ended, those
    /// whose results wait in a group among them: a group waits (up to
    /// `LINGER`) only while some are still out, so a lone attempt, as to
    /// an endpoint allowed one at a time, is written at once.
    pub fn start(store: Store, under_way: impl Fn() -> usize + Send + Sync + 'static) -> Recorder {
        let linger = Linger {
            at_most: LINGER,
            more_coming: Box::new(move |grouped| under_way() > grouped),
        };
        Recorder(GroupCommit::start(
            MAX_BATCH,
            Some(linger),
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
