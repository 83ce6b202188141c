//! Forgets single-use links and portal sessions a day after they ended:
//! an ended link answers the same as an unknown one, so nothing is lost.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::{clock::SharedClock, store::Store};

const KEEP_AFTER_END: Duration = Duration::from_secs(24 * 3600);

/// Every `every` until `shutdown`.
pub fn spawn(
    store: Store,
    clock: SharedClock,
    every: Duration,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    super::every(every, shutdown, move || {
        let (store, clock) = (store.clone(), clock.clone());
        async move {
            match store
                .delete_expired_links(clock.now().minus(KEEP_AFTER_END))
                .await
            {
                Ok(0) => {}
                Ok(n) => tracing::info!(removed = n, "forgot ended links and portal sessions"),
                Err(e) => {
                    tracing::warn!(error = %e, "could not forget ended links; will try again")
                }
            }
        }
    })
}
