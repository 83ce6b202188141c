//! Vacuums `deliveries` on Postgres soon after heavy churn: see the vacuum
//! section of `store/postgres.rs` for why Dakghar does not leave it to
//! autovacuum alone.

use std::{
    sync::{Arc, Mutex},
    time::Instant,
};

use tokio_util::sync::CancellationToken;

use crate::store::{Store, VacuumPolicy};

/// Checks every `policy.every` until `shutdown`; nothing where the
/// backend keeps no dead rows (SQLite).
pub fn spawn(
    store: Store,
    policy: VacuumPolicy,
    shutdown: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    if !store.keeps_dead_rows() {
        return None;
    }
    let gap = Arc::new(Mutex::new(policy.min_gap));
    let every = policy.every;
    let stop = shutdown.clone();
    Some(super::every(every, shutdown, move || {
        let (store, policy, gap, stop) = (store.clone(), policy.clone(), gap.clone(), stop.clone());
        async move {
            let min_gap = *gap.lock().unwrap_or_else(|e| e.into_inner());
            let now_policy = VacuumPolicy {
                min_gap,
                ..policy.clone()
            };
            let started = Instant::now();
            // A vacuum of a huge table can take minutes; shutdown does not wait for it.
            let done = tokio::select! {
                _ = stop.cancelled() => return,
                done = store.vacuum_deliveries_if_churned(&now_policy) => done,
            };
            match done {
                Ok(Some(dead_rows)) => {
                    let took = started.elapsed();
                    // At most a tenth of the time vacuuming, however big the table.
                    *gap.lock().unwrap_or_else(|e| e.into_inner()) = policy.min_gap.max(took * 10);
                    tracing::info!(
                        dead_rows,
                        took_ms = took.as_millis() as u64,
                        "vacuumed deliveries after churn"
                    )
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "vacuum of deliveries failed; will try again"),
            }
        }
    }))
}
