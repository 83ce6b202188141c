//! The claim loops and their life: started with the node, each claims due
//! deliveries within the room the node has left, starts their attempts,
//! and lets the round settle on its own while it claims again; what a
//! fault of ours interrupted goes back, and at shutdown what outlasts the
//! grace period. `tick` is one round by hand, for tests.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
};

use tokio::{sync::OwnedSemaphorePermit, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use super::{
    engine::{batch_permits, LOG_TARGET},
    error::DeliveryError,
    Engine,
};
use opentelemetry::trace::SpanKind;

use crate::{
    clock::Timestamp,
    store::{Delivery, Endpoint, Event, ReadAlong, StoreError},
};

/// A claimed batch: each delivery with its attempt (none when there is
/// nothing to send: its endpoint deleted meanwhile, or a fault of ours
/// already handed it back).
pub(super) type Round = Vec<(Delivery, Option<JoinHandle<Result<(), DeliveryError>>>)>;

impl Engine {
    /// Claims up to `limit` due deliveries and starts their attempts.
    pub(super) async fn start_round(self: &Arc<Self>, limit: i64) -> Result<Round, DeliveryError> {
        let now = self.clock.now();
        self.rescuer.now_and_then(now).await?;
        let claim_started = std::time::SystemTime::now();
        let crate::store::Claim {
            deliveries: claimed,
            held_back,
            read_along,
            ..
        } = crate::metrics::timed(
            "dakghar_db_claim_seconds",
            self.store.claim(
                now,
                now.plus(self.settings.lease),
                limit,
                self.settings.claim_rules(),
            ),
        )
        .await?;
        if held_back {
            self.held_back.store(true, Ordering::Release);
        }
        metrics::counter!("dakghar_leased_total", "by" => "claim").increment(claimed.len() as u64);
        self.start_attempts(now, claimed, read_along, claim_started)
            .await
    }

    /// Starts the attempts of what was just claimed (by a claim loop, or
    /// by an ingest group for this node's workers).
    pub(super) async fn start_attempts(
        self: &Arc<Self>,
        now: Timestamp,
        claimed: Vec<Delivery>,
        read_along: ReadAlong,
        claim_started: std::time::SystemTime,
    ) -> Result<Round, DeliveryError> {
        let mut inputs = match self.store.batch_inputs(&claimed, read_along).await {
            Ok(inputs) => inputs,
            Err(e) => {
                for delivery in &claimed {
                    let _ = self.store.release_claim(delivery, now).await;
                }
                return Err(e.into());
            }
        };
        let claimed_count = claimed.len();
        // Shared by the batch's attempts, not copied into each (a dozen
        // strings an endpoint).
        let endpoints: HashMap<String, Arc<Endpoint>> = std::mem::take(&mut inputs.endpoints)
            .into_iter()
            .map(|(id, endpoint)| (id, Arc::new(endpoint)))
            .collect();
        let mut handles = Vec::with_capacity(claimed.len());
        for delivery in claimed {
            // A fault of ours that holds this delivery alone: it backs off,
            // the rest of the batch goes on.
            let broken = inputs
                .broken_endpoints
                .get(&delivery.endpoint_id)
                .or_else(|| inputs.broken_events.get(&delivery.id));
            if let Some(why) = broken {
                self.fault_back(&delivery, why).await;
                handles.push((delivery, None));
                continue;
            }
            // Deleting an endpoint deletes its deliveries: nothing to send.
            let (Some(endpoint), Some(event)) = (
                endpoints.get(&delivery.endpoint_id).cloned(),
                inputs.events.remove(&delivery.id),
            ) else {
                handles.push((delivery, None));
                continue;
            };
            let trace = self.claim_span(&delivery, &event, claim_started, claimed_count);
            let engine = Arc::clone(self);
            let task_delivery = delivery.clone();
            let under_way = UnderWay::start(&self.under_way);
            let handle = tokio::spawn(async move {
                let _under_way = under_way;
                engine
                    .attempt(&task_delivery, &endpoint, &event, trace.as_deref())
                    .await
            });
            self.running_set().insert(
                delivery.id.clone(),
                (delivery.clone(), handle.abort_handle()),
            );
            handles.push((delivery, Some(handle)));
        }
        Ok(handles)
    }

    /// The claim's span in the trace of `delivery`'s event; its
    /// `traceparent`, for the attempt under it.
    fn claim_span(
        &self,
        delivery: &Delivery,
        event: &Event,
        started: std::time::SystemTime,
        batch: usize,
    ) -> Option<String> {
        let mut span = self.telemetry.start(
            "claim",
            SpanKind::Internal,
            event.traceparent.as_deref(),
            Some(started),
        )?;
        span.set("dakghar.event_id", delivery.event_id.clone());
        span.set("dakghar.delivery_id", delivery.id.clone());
        span.set("dakghar.endpoint_id", delivery.endpoint_id.clone());
        span.set("dakghar.claim_batch", batch as i64);
        let trace = span.traceparent();
        span.end();
        Some(trace)
    }

    /// `settle`, then wakes a loop if a claim held work back: the round's
    /// in-flight slots are free again, so that work can go now. Waking
    /// every time cost a claim that mostly found nothing (issue 16); the
    /// claim it wakes sets the flag again if work is still held.
    pub(super) async fn settle_and_wake(&self, round: Round, room: Option<OwnedSemaphorePermit>) {
        self.settle(round, room).await;
        if self.held_back.swap(false, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    /// Waits for a round's attempts and hands back what a fault of ours
    /// interrupted. `room`, if given, holds one permit per claimed delivery;
    /// each goes back as that delivery settles.
    pub(super) async fn settle(&self, round: Round, mut room: Option<OwnedSemaphorePermit>) {
        for (delivery, handle) in round {
            let outcome = match handle {
                Some(handle) => handle.await,
                None => Ok(Ok(())),
            };
            if let Some(permit) = room.as_mut() {
                drop(permit.split(1));
            }
            self.running_set().remove(&delivery.id);
            let fault = match outcome {
                Ok(Ok(())) => continue,
                Ok(Err(e)) if e.is_lost_claim() => {
                    tracing::warn!(target: LOG_TARGET, delivery = %delivery.id, "claim lost mid-attempt (lease ran out); the result was not recorded");
                    continue;
                }
                Ok(Err(e)) => e.to_string(),
                Err(join) if join.is_panic() => "worker panicked".to_string(),
                // Shutdown's grace ran out: hand_back_running returns it.
                Err(join) if join.is_cancelled() => continue,
                Err(join) => join.to_string(),
            };
            self.fault_back(&delivery, &fault).await;
        }
    }

    /// A fault of ours, not the receiver's, kept `delivery` from being sent
    /// or recorded: no attempt counts, the endpoint page says what is wrong,
    /// and the delivery waits longer each time in a row (5 s doubling to an
    /// hour) instead of being claimed again at once, in a loop.
    async fn fault_back(&self, delivery: &Delivery, fault: &str) {
        let now = self.clock.now();
        let streak = match self
            .store
            .record_endpoint_fault(&delivery.endpoint_id, fault, now)
            .await
        {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(target: LOG_TARGET, endpoint = %delivery.endpoint_id, error = %e, "could not record the fault on the endpoint");
                1
            }
        };
        let wait = fault_backoff(streak);
        tracing::error!(target: LOG_TARGET, delivery = %delivery.id, endpoint = %delivery.endpoint_id, fault = %fault, wait_s = wait.as_secs(), "fault on our side; the delivery waits, no attempt counted");
        if let Err(e) = self
            .store
            .postpone_claim(delivery, now.plus(wait), now)
            .await
        {
            tracing::error!(target: LOG_TARGET, delivery = %delivery.id, error = %e, "could not hand the delivery back; the rescuer will when its lease passes");
        }
    }

    /// A claim loop. It does not wait for its round to be recorded before
    /// claiming again: a round settles on its own while the room the node
    /// has left (`workers × batch_size` deliveries) is claimed meanwhile.
    /// Waiting held a loop through each round's group commit, and through
    /// a hanging receiver's whole timeout while other endpoints' events
    /// queued behind it.
    ///
    /// The loop first waits `stagger` (or a wake-up): loops that start
    /// together poll together ever after, and on SQLite each poll's probe
    /// holds a reader connection, so ten loops in step kept ten readers
    /// open (~1.8 MiB of an idle node's memory).
    pub(super) async fn work(
        self: Arc<Self>,
        stagger: std::time::Duration,
        shutdown: CancellationToken,
    ) {
        if !stagger.is_zero() {
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(stagger) => {}
                _ = shutdown.cancelled() => return,
            }
        }
        let batch = batch_permits(&self.settings);
        // Claim in chunks even when the room comes back a delivery at a
        // time: every claim is a transaction, and locks its endpoints.
        // A whole batch when the room allows: under the mixed load on
        // SQLite, claims of a quarter batch took the writer's turns from
        // results (bench: the delivery rate beside 1 000 events/s ingested
        // 6 879-7 700 -> 7 541-8 508/s). At most a quarter of the room, so
        // that a node of one or two loops need not wait for most of its
        // attempts to end before it claims again.
        let chunk = batch.min(self.room_size() / 4).max(1);
        while !shutdown.is_cancelled() {
            let notified = self.wake.notified();
            let mut permit = tokio::select! {
                p = Arc::clone(&self.room).acquire_many_owned(chunk) => match p {
                    Ok(p) => p,
                    Err(_) => return,
                },
                _ = shutdown.cancelled() => return,
            };
            let more = u32::try_from(self.room.available_permits())
                .unwrap_or(u32::MAX)
                .min(batch.saturating_sub(chunk));
            if let Ok(p) = Arc::clone(&self.room).try_acquire_many_owned(more) {
                permit.merge(p);
            }
            let limit = permit.num_permits();
            match self.start_round(limit as i64).await {
                Ok(round) if !round.is_empty() => {
                    let full = round.len() == limit;
                    // What was claimed keeps its permits until it settles.
                    let kept = permit.split(round.len());
                    let engine = Arc::clone(&self);
                    tokio::spawn(async move { engine.settle_and_wake(round, kept).await });
                    // A short claim took all there was; a full one may
                    // have left more behind.
                    if full {
                        continue;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(target: LOG_TARGET, error = %e, "claiming failed; backing off")
                }
            }
            drop(permit);
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(self.settings.poll_interval) => {}
                _ = shutdown.cancelled() => {}
            }
        }
    }

    /// One round: rescue expired leases, claim one batch, attempt all of it,
    /// and wait for the attempts. Returns how many deliveries were claimed.
    pub async fn tick(self: &Arc<Self>) -> Result<usize, DeliveryError> {
        let round = self.start_round(self.settings.batch_size).await?;
        let n = round.len();
        self.settle(round, None).await;
        Ok(n)
    }

    /// Runs `workers` loops until `shutdown` fires; then they stop claiming,
    /// in-flight attempts get the grace period to finish, and whatever is
    /// still running after it goes back to `pending` uncounted.
    pub fn spawn(self: &Arc<Self>, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
        let engine = Arc::clone(self);
        engine.accepting.store(true, Ordering::Release);
        tokio::spawn(async move {
            let mut loops = tokio::task::JoinSet::new();
            let workers = engine.settings.workers.max(1);
            for k in 0..workers {
                let engine = Arc::clone(&engine);
                let shutdown = shutdown.clone();
                let stagger = engine.settings.poll_interval * k as u32 / workers as u32;
                loops.spawn(async move { engine.work(stagger, shutdown).await });
            }
            let listening = tokio::spawn(Arc::clone(&engine).listen(shutdown.clone()));
            shutdown.cancelled().await;
            engine.accepting.store(false, Ordering::Release);
            let grace = engine.settings.shutdown_grace;
            let drained = tokio::time::timeout(grace, async {
                while loops.join_next().await.is_some() {}
                // The whole room back: every attempt recorded or handed back.
                let _ = engine.room.acquire_many(engine.room_size()).await;
            })
            .await
            .is_ok();
            if !drained {
                loops.abort_all();
                engine.hand_back_running().await;
            }
            let _ = listening.await;
        })
    }

    async fn hand_back_running(&self) {
        let running: Vec<_> = self.running_set().drain().map(|(_, v)| v).collect();
        for (delivery, abort) in &running {
            abort.abort();
            tracing::warn!(delivery = %delivery.id, "grace period over; attempt abandoned");
        }
        let now = self.clock.now();
        for (delivery, _) in running {
            match self.store.release_claim(&delivery, now).await {
                Ok(()) | Err(StoreError::LostClaim(_)) => {}
                Err(e) => {
                    tracing::error!(delivery = %delivery.id, error = %e, "could not hand back; the rescuer will when the lease passes")
                }
            }
        }
    }
}

/// One attempt counted in `Engine::under_way` from before its task starts
/// until the task ends, however it ends (its result committed, a fault,
/// a panic, or aborted at shutdown).
struct UnderWay(Arc<AtomicUsize>);

impl UnderWay {
    fn start(count: &Arc<AtomicUsize>) -> UnderWay {
        count.fetch_add(1, Ordering::AcqRel);
        UnderWay(Arc::clone(count))
    }
}

impl Drop for UnderWay {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long a delivery waits after the `streak`-th fault of ours in a row
/// on its endpoint.
fn fault_backoff(streak: i64) -> std::time::Duration {
    let doublings = u32::try_from(streak.max(1) - 1).unwrap_or(u32::MAX).min(10);
    (std::time::Duration::from_secs(5) * 2u32.pow(doublings))
        .min(std::time::Duration::from_secs(3600))
}

#[cfg(test)]
mod tests {
    use super::fault_backoff;

    #[test]
    fn faults_back_off_from_five_seconds_to_an_hour() {
        let secs: Vec<u64> = [1, 2, 3, 4, 10, 11, 12, 1000, -3]
            .iter()
            .map(|n| fault_backoff(*n).as_secs())
            .collect();
        assert_eq!(secs, [5, 10, 20, 40, 2560, 3600, 3600, 3600, 5]);
    }
}
