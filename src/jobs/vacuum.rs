//! Vacuums the partitions of `deliveries` that rows pass through on
//! Postgres soon after heavy churn: see the vacuum section of
//! `store/postgres.rs` for why Dakghar does not leave it to autovacuum
//! alone.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
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
    let partitions = store.churned_partitions();
    if partitions.is_empty() {
        return None;
    }
    let gaps = Arc::new(Mutex::new(Gaps::new(policy.min_gap, partitions.len())));
    let every = policy.every;
    let stop = shutdown.clone();
    Some(super::every(every, shutdown, move || {
        let (store, policy, gaps, stop) =
            (store.clone(), policy.clone(), gaps.clone(), stop.clone());
        async move {
            for (i, &partition) in partitions.iter().enumerate() {
                let now_policy = VacuumPolicy {
                    min_gap: gaps.lock().unwrap_or_else(|e| e.into_inner()).of(i),
                    ..policy.clone()
                };
                let started = Instant::now();
                // A vacuum of a huge table can take minutes; shutdown does not wait for it.
                let done = tokio::select! {
                    _ = stop.cancelled() => return,
                    done = store.vacuum_if_churned(partition, &now_policy) => done,
                };
                match done {
                    Ok(Some(dead_rows)) => {
                        let took = started.elapsed();
                        gaps.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .vacuumed(i, took);
                        tracing::info!(
                            partition,
                            dead_rows,
                            took_ms = took.as_millis() as u64,
                            "vacuumed a partition of deliveries after churn"
                        )
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!(
                        partition,
                        error = %e,
                        "vacuum of a partition of deliveries failed; will try again"
                    ),
                }
            }
        }
    }))
}

/// How long each partition is left alone after its last vacuum: ten
/// times what that vacuum took, so a partition is vacuumed at most a
/// tenth of the time however big it grows. Kept per partition: after a
/// burn-down of a million deliveries a vacuum of the waiting partition
/// took seconds, and one gap for both left the small, busy in-flight
/// partition unvacuumed for minutes while every result churned it.
#[derive(Debug)]
struct Gaps {
    min_gap: Duration,
    of: Vec<Duration>,
}

impl Gaps {
    fn new(min_gap: Duration, partitions: usize) -> Self {
        Gaps {
            min_gap,
            of: vec![min_gap; partitions],
        }
    }

    fn of(&self, partition: usize) -> Duration {
        self.of[partition]
    }

    fn vacuumed(&mut self, partition: usize, took: Duration) {
        self.of[partition] = self.min_gap.max(took * 10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_vacuum_stretches_only_its_own_partitions_gap() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        let mut gaps = Gaps::new(s(2), 2);
        assert_eq!((gaps.of(0), gaps.of(1)), (s(2), s(2)));

        gaps.vacuumed(0, s(6));
        assert_eq!((gaps.of(0), gaps.of(1)), (s(60), s(2)));

        // A short vacuum keeps the floor; the long one's gap stays its own.
        gaps.vacuumed(1, ms(40));
        assert_eq!((gaps.of(0), gaps.of(1)), (s(60), s(2)));
        gaps.vacuumed(1, ms(900));
        assert_eq!((gaps.of(0), gaps.of(1)), (s(60), s(9)));

        // A quick vacuum after the table shrank brings the gap back down.
        gaps.vacuumed(0, ms(50));
        assert_eq!((gaps.of(0), gaps.of(1)), (s(2), s(9)));
    }
}
