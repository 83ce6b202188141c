//! The worker nodes' vacuum job on Postgres: see `store/vacuum.rs` for why
//! Dakghar does not leave `deliveries` to autovacuum alone.

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::store::{Backend, Store, VacuumPolicy};

/// Checks every `policy.every` until `shutdown`; nothing on SQLite.
pub fn spawn(
    store: Store,
    policy: VacuumPolicy,
    shutdown: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    if store.backend() != Backend::Postgres {
        return None;
    }
    Some(tokio::spawn(async move {
        let mut now_policy = policy.clone();
        loop {
            let started = Instant::now();
            // A vacuum of a huge table can take minutes; shutdown does not wait for it.
            let done = tokio::select! {
                _ = shutdown.cancelled() => return,
                done = store.vacuum_deliveries_if_churned(&now_policy) => done,
            };
            match done {
                Ok(Some(dead_rows)) => {
                    let took = started.elapsed();
                    // At most a tenth of the time vacuuming, however big the table.
                    now_policy.min_gap = policy.min_gap.max(took * 10);
                    tracing::info!(
                        dead_rows,
                        took_ms = took.as_millis() as u64,
                        "vacuumed deliveries after churn"
                    )
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "vacuum of deliveries failed; will try again"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(policy.every) => {}
            }
        }
    }))
}
