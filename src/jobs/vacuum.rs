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
    let pace = Arc::new(Mutex::new(Pace::new(&policy, partitions.len())));
    let every = policy.every;
    let stop = shutdown.clone();
    Some(super::every(every, shutdown, move || {
        let (store, pace, stop) = (store.clone(), pace.clone(), stop.clone());
        async move {
            for (i, &partition) in partitions.iter().enumerate() {
                let now_policy = pace.lock().unwrap_or_else(|e| e.into_inner()).of(i);
                let started = Instant::now();
                // A vacuum of a huge table can take minutes; shutdown does not wait for it.
                let done = tokio::select! {
                    _ = stop.cancelled() => return,
                    done = store.vacuum_if_churned(partition, &now_policy) => done,
                };
                match done {
                    Ok(Some(dead_rows)) => {
                        let took = started.elapsed();
                        pace.lock()
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

/// A vacuum is worth its cost when it clears at least this many dead
/// rows for each millisecond the partition's last one took. Measured
/// in `make bench` (Postgres, x10, the server's logs): in a burn-down of
/// a million deliveries the in-flight partition's vacuums cleared
/// 48-1 588 rows a millisecond and the waiting partition's 51-175.
/// After it, each vacuum of the waiting partition read the hundreds of
/// MiB of index the backlog left to remove a few thousand entries
/// (188-406 ms, 6.5-64 rows a millisecond), while the ingest leased
/// nearly everything and claims walked little. At 100 that partition's
/// burn-down vacuums came every 4.4-7.7 s in one run instead of 3; at
/// 50 every 3.3-3.4 s, as without the bar.
const ROWS_PER_MS: i64 = 50;

/// When each partition is vacuumed again, from what its own last vacuum
/// took: no sooner than ten times as long after it (so at most a tenth
/// of the time however big it grows), and once `ROWS_PER_MS` rows died
/// for each of its milliseconds. Kept per partition: with one gap for
/// both, the waiting partition's long vacuums set the small in-flight
/// one's pace (every 3.3-6.5 s instead of 2-2.6 during a burn-down).
/// Each partition's policy starts as the node's (`floor`).
#[derive(Debug)]
struct Pace {
    floor: VacuumPolicy,
    of: Vec<VacuumPolicy>,
}

impl Pace {
    fn new(floor: &VacuumPolicy, partitions: usize) -> Self {
        Pace {
            floor: floor.clone(),
            of: vec![floor.clone(); partitions],
        }
    }

    fn of(&self, partition: usize) -> VacuumPolicy {
        self.of[partition].clone()
    }

    fn vacuumed(&mut self, partition: usize, took: Duration) {
        let ms = i64::try_from(took.as_millis()).unwrap_or(i64::MAX);
        self.of[partition] = VacuumPolicy {
            min_gap: self.floor.min_gap.max(took.saturating_mul(10)),
            dead_rows: self.floor.dead_rows.max(ms.saturating_mul(ROWS_PER_MS)),
            ..self.floor.clone()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_partition_is_paced_by_its_own_last_vacuum() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        let next = |min_gap, dead_rows| VacuumPolicy {
            every: s(1),
            min_gap,
            dead_rows,
        };
        let floor = || next(s(2), 2_000);
        let mut pace = Pace::new(&floor(), 2);
        assert_eq!((pace.of(0), pace.of(1)), (floor(), floor()));

        // A long vacuum of one partition: ten times as long a gap, a bar
        // of 50 rows a millisecond; the other keeps its own.
        pace.vacuumed(0, ms(450));
        assert_eq!((pace.of(0), pace.of(1)), (next(ms(4_500), 22_500), floor()));

        // A short vacuum keeps the floor.
        pace.vacuumed(1, ms(12));
        assert_eq!((pace.of(0), pace.of(1)), (next(ms(4_500), 22_500), floor()));
        pace.vacuumed(1, ms(300));
        assert_eq!(pace.of(1), next(s(3), 15_000));

        // A quick vacuum after the partition shrank brings it back down.
        pace.vacuumed(0, ms(15));
        assert_eq!((pace.of(0), pace.of(1)), (floor(), next(s(3), 15_000)));

        // However long, no overflow.
        pace.vacuumed(0, Duration::MAX);
        assert_eq!(pace.of(0).min_gap, Duration::MAX);
        assert_eq!(pace.of(0).dead_rows, i64::MAX);
    }
}
