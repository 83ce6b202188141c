//! What an ingest group leases for this node's workers
//! (`store::Workers`): the room it may take, and its attempts, started as
//! a claim loop's are.

use std::sync::{atomic::Ordering, Arc};

use super::engine::{batch_permits, LOG_TARGET};
use super::Engine;
use crate::store::{Claim, LeaseOffer, LeaseTerms, Workers};

impl Workers for Engine {
    fn offer(&self) -> Option<LeaseOffer> {
        if !self.accepting.load(Ordering::Acquire) {
            return None;
        }
        // A batch at most, as a claim loop takes: a group that makes more
        // leaves the rest to the loops.
        let want = u32::try_from(self.room.available_permits())
            .unwrap_or(u32::MAX)
            .min(batch_permits(&self.settings));
        if want == 0 {
            return None;
        }
        let room = Arc::clone(&self.room).try_acquire_many_owned(want).ok()?;
        let now = self.clock.now();
        Some(LeaseOffer {
            terms: LeaseTerms {
                now,
                lease_until: now.plus(self.settings.lease),
                limit: i64::from(want),
                rules: self.settings.claim_rules(),
            },
            room,
        })
    }

    fn take(self: Arc<Self>, leased: Claim, offer: LeaseOffer) {
        let Claim {
            deliveries,
            held_back,
            read_along,
            ..
        } = leased;
        if held_back {
            self.held_back.store(true, Ordering::Release);
        }
        if deliveries.is_empty() {
            return;
        }
        metrics::counter!("dakghar_leased_total", "by" => "ingest")
            .increment(deliveries.len() as u64);
        let LeaseOffer { terms, mut room } = offer;
        // The rest of the offer goes back now; what was leased keeps its
        // permits until it settles.
        let kept = room.split(deliveries.len());
        drop(room);
        let leased_at = std::time::SystemTime::now();
        tokio::spawn(async move {
            // Stopping since the offer: hand back rather than start what
            // the grace period may not see (it is not running yet).
            if !self.accepting.load(Ordering::Acquire) {
                for delivery in &deliveries {
                    let _ = self.store.release_claim(delivery, terms.now).await;
                }
                return;
            }
            match self
                .start_attempts(terms.now, deliveries, read_along, leased_at)
                .await
            {
                Ok(round) => self.settle_and_wake(round, kept).await,
                Err(e) => {
                    tracing::error!(target: LOG_TARGET, error = %e, "could not start what an ingest leased; handed back");
                    // A loop claims them again (and backs off if the fault
                    // holds); their ingest woke none if its lease left
                    // nothing else due.
                    self.wake.notify_one();
                }
            }
        });
    }
}
