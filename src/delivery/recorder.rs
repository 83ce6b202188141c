//! Group commit for attempt results: attempts that finish at about the same
//! time share one transaction. Under load the batches grow by themselves;
//! when idle each result is written the moment it arrives.

use tokio::sync::{mpsc, oneshot};

use super::error::DeliveryError;
use crate::store::{Completion, Delivery, Store, StoreError};

/// The most results one transaction carries.
const MAX_BATCH: usize = 256;

type Reply = oneshot::Sender<Result<Delivery, DeliveryError>>;

#[derive(Debug, Clone)]
pub struct Recorder {
    queue: mpsc::UnboundedSender<(Completion, Reply)>,
}

impl Recorder {
    /// Starts the writer task; it ends once every `Recorder` is dropped.
    pub fn start(store: Store) -> Recorder {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_batches(store, rx));
        Recorder { queue }
    }

    /// Records one attempt; returns once it is committed.
    pub async fn complete(&self, completion: Completion) -> Result<Delivery, DeliveryError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send((completion, reply))
            .map_err(|_| DeliveryError::RecorderStopped)?;
        crate::metrics::timed("dakghar_db_record_seconds", answer)
            .await
            .map_err(|_| DeliveryError::RecorderStopped)?
    }
}

async fn write_batches(store: Store, mut rx: mpsc::UnboundedReceiver<(Completion, Reply)>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let (items, replies): (Vec<_>, Vec<_>) = batch.drain(..).unzip();
        match store.complete_attempts(&items).await {
            Ok(answers) => {
                for (reply, answer) in replies.into_iter().zip(answers) {
                    let _ = reply.send(answer.map_err(DeliveryError::from));
                }
            }
            Err(e) => {
                // Nothing of the batch was written. Its requests were sent,
                // so giving up means sending them again: first try each on
                // its own (a transient error such as a deadlock clears);
                // only what still fails goes back as a fault of ours.
                tracing::warn!(error = %e, results = items.len(), "recording a batch of attempts failed; recording them one by one");
                for (item, reply) in items.into_iter().zip(replies) {
                    let answer = match store.complete_attempts(std::slice::from_ref(&item)).await {
                        Ok(mut one) => one
                            .pop()
                            .unwrap_or_else(|| Err(StoreError::LostClaim(item.claimed.id.clone())))
                            .map_err(DeliveryError::from),
                        Err(e) => Err(DeliveryError::Record(e)),
                    };
                    let _ = reply.send(answer);
                }
            }
        }
    }
}
