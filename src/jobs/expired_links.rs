//! Forgets single-use links and portal sessions a day after they ended
//! (an ended link answers the same as an unknown one, so nothing is
//! lost), the personal emails that carried links once those ended, and
//! failed sign-ins that no longer count (every unknown email tried would
//! otherwise stay a row forever).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::{
    clock::{SharedClock, Timestamp},
    store::{Store, StoreError},
};

const KEEP_AFTER_END: Duration = Duration::from_secs(24 * 3600);

/// The longest a mailed link lives (an invitation's 72 hours): a personal
/// email older than this carries nothing that still works.
pub const MAILED_LINK_LIFETIME: Duration = Duration::from_secs(72 * 3600);

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
            match run_once(&store, clock.now()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(removed = n, "forgot ended links, sessions and their mail"),
                Err(e) => {
                    tracing::warn!(error = %e, "could not forget ended links; will try again")
                }
            }
        }
    })
}

/// One pass; returns how many rows it forgot.
pub async fn run_once(store: &Store, now: Timestamp) -> Result<u64, StoreError> {
    let links = store
        .delete_expired_links(now.minus(KEEP_AFTER_END))
        .await?;
    let mail = store
        .delete_personal_mail(now.minus(MAILED_LINK_LIFETIME))
        .await?;
    let failures = store
        .prune_login_failures(now, crate::auth::throttle::FORGET_AFTER)
        .await?;
    Ok(links + mail + failures)
}
