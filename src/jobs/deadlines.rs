//! Keeps the retry window for every pending delivery, whatever its
//! endpoint's state (chapter 000: give up after the window; 003: a paused
//! backlog must still keep its promises): pending work of a paused or
//! disabled endpoint expires once its window has passed, saying why.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::{
    clock::{SharedClock, Timestamp},
    store::{Store, StoreError},
};

/// What an expired delivery of a held endpoint says.
pub const REASON: &str = "retry window passed while paused";

pub fn spawn(
    store: Store,
    clock: SharedClock,
    every: Duration,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    super::every(every, shutdown, move || {
        let (store, clock) = (store.clone(), clock.clone());
        async move {
            match run_once(&store, clock.now()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(expired = n, "expired paused deliveries past their window"),
                Err(e) => {
                    tracing::warn!(error = %e, "could not expire overdue paused deliveries; will try again")
                }
            }
        }
    })
}

/// One pass; returns how many expired.
pub async fn run_once(store: &Store, now: Timestamp) -> Result<u64, StoreError> {
    let total = store.expire_held_overdue(REASON, now).await?;
    if total > 0 {
        metrics::counter!("dakghar_dead_lettered_total", "reason" => "expired").increment(total);
    }
    Ok(total)
}
