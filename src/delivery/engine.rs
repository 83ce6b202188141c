//! The embedded workers: claim due deliveries, send them, record what
//! happened, and decide what comes next (SPEC §4).

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use tokio::{
    sync::{Notify, OwnedSemaphorePermit, Semaphore},
    task::{AbortHandle, JoinHandle},
};
use tokio_util::sync::CancellationToken;

use super::{
    classify::{classify, Verdict},
    recorder::Recorder,
    request::{self, Outgoing, Sent},
    retry_after,
    settings::DeliverySettings,
};
use crate::{
    clock::{SharedClock, Timestamp},
    store::{
        AttemptRecord, Backend, Completion, Delivery, Endpoint, Event, Store, StoreError,
        Transition,
    },
};

/// A claimed batch: each delivery with its attempt (none when there is
/// nothing to send, its endpoint deleted meanwhile).
type Round = Vec<(Delivery, Option<JoinHandle<Result<(), StoreError>>>)>;

/// The most one claim loop takes at once, as semaphore permits.
fn batch_permits(settings: &DeliverySettings) -> u32 {
    u32::try_from(settings.batch_size.max(1)).unwrap_or(u32::MAX)
}

/// How many deliveries a node holds claimed at once, across its loops.
fn room_size(settings: &DeliverySettings) -> u32 {
    batch_permits(settings)
        .saturating_mul(u32::try_from(settings.workers.max(1)).unwrap_or(u32::MAX))
}

/// Runs before each request; tests use it to plant worker faults.
pub type FaultHook = Arc<dyn Fn(&Delivery) + Send + Sync>;

pub struct Engine {
    store: Store,
    clock: SharedClock,
    client: reqwest::Client,
    settings: DeliverySettings,
    wake: Arc<Notify>,
    /// This engine's name in work announcements, to skip its own.
    node_id: String,
    /// An announcement is queued and not yet sent: later events ride on it.
    announcing: Arc<AtomicBool>,
    recorder: Recorder,
    /// When this node last looked for expired leases.
    last_rescue: Mutex<Option<Timestamp>>,
    /// Claimed and not yet settled deliveries, one permit each.
    room: Arc<Semaphore>,
    /// Attempts under way, so shutdown can hand back what misses the grace period.
    running: Mutex<HashMap<String, (Delivery, AbortHandle)>>,
    fault_hook: Mutex<Option<FaultHook>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("settings", &self.settings)
            .finish()
    }
}

impl Engine {
    pub fn new(
        store: Store,
        clock: SharedClock,
        settings: DeliverySettings,
    ) -> reqwest::Result<Arc<Engine>> {
        Ok(Arc::new(Engine {
            client: request::client(&settings)?,
            room: Arc::new(Semaphore::new(room_size(&settings) as usize)),
            recorder: Recorder::start(store.clone()),
            last_rescue: Mutex::new(None),
            store,
            clock,
            settings,
            wake: Arc::new(Notify::new()),
            node_id: crate::ids::random_token(16),
            announcing: Arc::new(AtomicBool::new(false)),
            running: Mutex::new(HashMap::new()),
            fault_hook: Mutex::new(None),
        }))
    }

    pub fn settings(&self) -> &DeliverySettings {
        &self.settings
    }

    /// Wakes idle workers here and on every other node: new work arrived,
    /// do not wait for the poll.
    pub async fn wake(&self) {
        // One worker per wake: a new event is one delivery or a few, and
        // every extra worker woken spends a claim transaction finding
        // nothing. A worker that claims something looks again at once.
        self.wake.notify_one();
        // The producer does not wait for the NOTIFY round trip. While one is
        // queued, later events skip theirs: the queued one clears the flag
        // before it is sent, so it goes out after every event that skipped.
        if self.store.backend() != Backend::Postgres || self.announcing.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let (store, flag, origin) = (
            self.store.clone(),
            Arc::clone(&self.announcing),
            self.node_id.clone(),
        );
        tokio::spawn(async move {
            flag.store(false, Ordering::Release);
            if let Err(e) = store.announce_work_from(&origin).await {
                tracing::warn!(error = %e, "could not announce new work to other nodes; they will poll");
            }
        });
    }

    pub fn set_fault_hook(&self, hook: Option<FaultHook>) {
        *self.fault_hook.lock().unwrap_or_else(|e| e.into_inner()) = hook;
    }

    /// One round: rescue expired leases, claim one batch, attempt all of it,
    /// and wait for the attempts. Returns how many deliveries were claimed.
    pub async fn tick(self: &Arc<Self>) -> Result<usize, StoreError> {
        let round = self.start_round(self.settings.batch_size).await?;
        let n = round.len();
        self.settle(round, None).await;
        Ok(n)
    }

    /// Claims up to `limit` due deliveries and starts their attempts.
    async fn start_round(self: &Arc<Self>, limit: i64) -> Result<Round, StoreError> {
        let now = self.clock.now();
        self.rescue_now_and_then(now).await?;
        let claimed = crate::metrics::timed(
            "dakghar_db_claim_seconds",
            self.store
                .claim_due(now, now.plus(self.settings.lease), limit),
        )
        .await?;
        let mut inputs = match self.store.batch_inputs(&claimed).await {
            Ok(inputs) => inputs,
            Err(e) => {
                for delivery in &claimed {
                    let _ = self.store.release_claim(delivery, now).await;
                }
                return Err(e);
            }
        };
        let mut handles = Vec::with_capacity(claimed.len());
        for delivery in claimed {
            // Deleting an endpoint deletes its deliveries: nothing to send.
            let (Some(endpoint), Some(event)) = (
                inputs.endpoints.get(&delivery.endpoint_id).cloned(),
                inputs.events.remove(&delivery.id),
            ) else {
                handles.push((delivery, None));
                continue;
            };
            let engine = Arc::clone(self);
            let task_delivery = delivery.clone();
            let handle =
                tokio::spawn(
                    async move { engine.attempt(&task_delivery, &endpoint, &event).await },
                );
            self.running_set().insert(
                delivery.id.clone(),
                (delivery.clone(), handle.abort_handle()),
            );
            handles.push((delivery, Some(handle)));
        }
        Ok(handles)
    }

    /// Waits for a round's attempts and hands back what a fault of ours
    /// interrupted. `room`, if given, holds one permit per claimed delivery;
    /// each goes back as that delivery settles.
    async fn settle(&self, round: Round, mut room: Option<OwnedSemaphorePermit>) {
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
                Ok(Err(StoreError::LostClaim(_))) => {
                    tracing::warn!(delivery = %delivery.id, "claim lost mid-attempt (lease ran out); the result was not recorded");
                    continue;
                }
                Ok(Err(e)) => e.to_string(),
                Err(join) if join.is_panic() => "worker panicked".to_string(),
                // Shutdown's grace ran out: hand_back_running returns it.
                Err(join) if join.is_cancelled() => continue,
                Err(join) => join.to_string(),
            };
            // A fault of ours, not the receiver's: as if never claimed.
            tracing::error!(delivery = %delivery.id, fault = %fault, "worker fault; delivery returned to pending");
            if let Err(e) = self.store.release_claim(&delivery, self.clock.now()).await {
                tracing::error!(delivery = %delivery.id, error = %e, "could not release claim; the rescuer will");
            }
        }
    }

    fn running_set(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Delivery, AbortHandle)>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Expired leases are rare (a crashed node); looking once a second is
    /// plenty and keeps a write off every claim.
    async fn rescue_now_and_then(&self, now: Timestamp) -> Result<(), StoreError> {
        {
            let mut last = self.last_rescue.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|at| at <= now && at.until(now) < Duration::from_secs(1)) {
                return Ok(());
            }
            *last = Some(now);
        }
        let rescued = self.store.rescue_expired_leases(now).await?;
        if rescued > 0 {
            tracing::warn!(
                rescued,
                "returned deliveries with expired leases to pending"
            );
        }
        Ok(())
    }

    /// Runs `workers` loops until `shutdown` fires; then they stop claiming,
    /// in-flight attempts get the grace period to finish, and whatever is
    /// still running after it goes back to `pending` uncounted.
    pub fn spawn(self: &Arc<Self>, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
        let engine = Arc::clone(self);
        tokio::spawn(async move {
            let mut loops = tokio::task::JoinSet::new();
            for _ in 0..engine.settings.workers.max(1) {
                let engine = Arc::clone(&engine);
                let shutdown = shutdown.clone();
                loops.spawn(async move { engine.work(shutdown).await });
            }
            let listening = tokio::spawn(Arc::clone(&engine).listen(shutdown.clone()));
            shutdown.cancelled().await;
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

    /// Wakes this node's workers whenever any node announces new work.
    async fn listen(self: Arc<Self>, shutdown: CancellationToken) {
        let mut listener = loop {
            match self.store.listen_for_work().await {
                Ok(Some(l)) => break l,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for work from other nodes yet; polling meanwhile");
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                    }
                }
            }
        };
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                // recv reconnects by itself after a dropped connection.
                got = listener.recv() => match got {
                    // Our own news: wake() already woke a worker here, and
                    // a second one would only claim nothing.
                    Ok(n) if n.payload() == self.node_id => {}
                    Ok(_) => self.wake.notify_one(),
                    Err(e) => {
                        tracing::warn!(error = %e, "listening for work failed; retrying");
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                    }
                },
            }
        }
    }

    /// A claim loop. It does not wait for its round to be recorded before
    /// claiming again: a round settles on its own while the room the node
    /// has left (`workers × batch_size` deliveries) is claimed meanwhile.
    /// Waiting held a loop through each round's group commit, and through
    /// a hanging receiver's whole timeout while other endpoints' events
    /// queued behind it.
    async fn work(self: Arc<Self>, shutdown: CancellationToken) {
        let batch = batch_permits(&self.settings);
        // Claim in chunks even when the room comes back a delivery at a
        // time: every claim takes the cluster-wide claim lock.
        let chunk = (batch / 4).clamp(1, self.room_size());
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
                    tokio::spawn(async move {
                        engine.settle(round, kept).await;
                        // Its in-flight slots are free again: work held
                        // back by max_in_flight can be claimed now.
                        engine.wake.notify_one();
                    });
                    // A short claim took all there was; a full one may
                    // have left more behind.
                    if full {
                        continue;
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "claiming failed; backing off"),
            }
            drop(permit);
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(self.settings.poll_interval) => {}
                _ = shutdown.cancelled() => {}
            }
        }
    }

    fn room_size(&self) -> u32 {
        room_size(&self.settings)
    }

    async fn attempt(
        &self,
        delivery: &Delivery,
        endpoint: &Endpoint,
        event: &Event,
    ) -> Result<(), StoreError> {
        let now = self.clock.now();
        if now.millis() >= delivery.give_up_at {
            self.store
                .expire_claimed(delivery, "retry window passed before the next attempt", now)
                .await?;
            tracing::info!(delivery = %delivery.id, outcome = "expired", "delivery expired: retry window passed");
            metrics::counter!("dakghar_dead_lettered_total", "reason" => "expired").increment(1);
            return Ok(());
        }
        if endpoint.state != "active" {
            return self.store.release_claim(delivery, now).await;
        }
        if endpoint.circuit_state == "open" && !self.store.try_half_open(&endpoint.id, now).await? {
            // Another worker holds the single half-open trial.
            return self.store.release_claim(delivery, now).await;
        }
        if let Some(free_at) = self.over_rate_limit(endpoint, now).await? {
            return self.store.postpone_claim(delivery, free_at, now).await;
        }
        let mut secrets = vec![endpoint.secret.as_str()];
        if let (Some(old), Some(until)) = (
            &endpoint.previous_secret,
            endpoint.previous_secret_expires_at,
        ) {
            if until > now.millis() {
                secrets.push(old.as_str());
            }
        }
        let hook = self
            .fault_hook
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(hook) = hook {
            hook(delivery);
        }
        let out = Outgoing {
            url: &endpoint.url,
            event_id: &event.id,
            body: &event.payload,
            secrets,
            now,
        };
        let sent = request::send(&self.client, out, &self.settings)
            .await
            .map_err(|e| StoreError::Config(e.to_string()))?;
        self.record(delivery, endpoint, sent, now).await
    }

    async fn record(
        &self,
        delivery: &Delivery,
        endpoint: &Endpoint,
        sent: Sent,
        started: Timestamp,
    ) -> Result<(), StoreError> {
        let now = self.clock.now();
        let verdict = if sent.blocked {
            Verdict::Blocked
        } else if sent.incomplete {
            // Headers alone are no answer: the total timeout (or a reset)
            // cut the body off, so the attempt is retried like any timeout.
            Verdict::Retry
        } else {
            classify(sent.status)
        };
        let failed_count = u32::try_from(delivery.attempts + 1).unwrap_or(u32::MAX);
        let mut reason = sent.error.clone();
        let transition = match verdict {
            Verdict::Delivered => Transition::Delivered,
            Verdict::Failed | Verdict::Gone | Verdict::Blocked => Transition::Failed,
            Verdict::Retry | Verdict::RetryAmbiguous => {
                self.retry_or_expire(delivery, &sent, failed_count, now, &mut reason)
            }
        };
        let record = AttemptRecord {
            attempt: delivery.attempt_seq + 1,
            started_at: started.millis(),
            duration_ms: i64::try_from(sent.duration.as_millis()).unwrap_or(i64::MAX),
            request_headers: serde_json::to_string(&sent.request_headers).unwrap_or_default(),
            response_status: sent.status.map(i64::from),
            response_headers: Some(
                serde_json::to_string(&sent.response_headers).unwrap_or_default(),
            ),
            response_body: sent.status.map(|_| sent.body.clone()),
            error: reason,
            classification: verdict.as_str().to_string(),
        };
        let attempt = record.attempt;
        let duration_ms = record.duration_ms;
        self.recorder
            .complete(Completion {
                claimed: delivery.clone(),
                record,
                transition,
                now,
            })
            .await?;
        let host = url::Url::parse(&endpoint.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        let status = sent
            .status
            .map_or_else(|| "none".to_string(), |s| s.to_string());
        tracing::info!(
            delivery = %delivery.id,
            endpoint = %endpoint.id,
            host = %host,
            attempt,
            status = %status,
            duration_ms,
            outcome = %verdict.as_str(),
            "attempt"
        );
        let final_state = match transition {
            Transition::Retry { .. } => None,
            Transition::Delivered => Some("delivered"),
            Transition::Failed => Some("failed"),
            Transition::Expired => Some("expired"),
        };
        if let Some(state) = final_state {
            tracing::info!(delivery = %delivery.id, endpoint = %endpoint.id, state, "delivery finished");
        }
        record_metrics(delivery, &sent, verdict, transition, started);
        self.update_endpoint_health(endpoint, verdict, transition, now)
            .await
    }

    fn retry_or_expire(
        &self,
        delivery: &Delivery,
        sent: &Sent,
        failed_count: u32,
        now: Timestamp,
        reason: &mut Option<String>,
    ) -> Transition {
        if failed_count >= self.settings.max_attempts {
            *reason = Some(format!("gave up after {failed_count} attempts"));
            return Transition::Expired;
        }
        let backoff = self
            .settings
            .backoff
            .delay(failed_count, &mut rand::thread_rng());
        let asked = match sent.status {
            Some(429 | 503) => sent
                .retry_after
                .as_deref()
                .and_then(|v| retry_after::parse(v, now)),
            _ => None,
        };
        let delay = asked.map_or(backoff, |a| a.max(backoff));
        let next = now.plus(delay);
        if next.millis() >= delivery.give_up_at {
            *reason = Some(match asked {
                Some(a) if a >= backoff => format!(
                    "the receiver asked to wait {}s (Retry-After), past the retry window",
                    a.as_secs()
                ),
                _ => "the next attempt would fall past the retry window".to_string(),
            });
            return Transition::Expired;
        }
        Transition::Retry {
            next_attempt_at: next,
        }
    }

    async fn update_endpoint_health(
        &self,
        endpoint: &Endpoint,
        verdict: Verdict,
        transition: Transition,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        if verdict == Verdict::Delivered {
            // Recorded with the attempt, in the same transaction.
            return Ok(());
        }
        let updated = self
            .store
            .endpoint_failed(
                &endpoint.id,
                verdict.is_retry(),
                verdict.is_permanent_failure(),
                now,
            )
            .await?;
        // Results of attempts that were already in flight when the circuit
        // opened must not open it again: each reopening doubles the
        // cooldown, and a batch of 500 would push it straight to the cap.
        let opens = verdict.is_retry()
            && updated.transient_streak >= self.settings.circuit_threshold
            && updated.circuit_state != "open";
        if opens {
            let grown =
                Duration::from_millis(u64::try_from(updated.circuit_cooldown_ms).unwrap_or(0) * 2);
            let cooldown = grown
                .max(self.settings.circuit_base_cooldown)
                .min(self.settings.circuit_max_cooldown);
            let ms = i64::try_from(cooldown.as_millis()).unwrap_or(i64::MAX);
            self.store
                .open_circuit(&endpoint.id, now.plus(cooldown), ms, now)
                .await?;
            tracing::warn!(endpoint = %endpoint.id, cooldown_s = cooldown.as_secs(), "circuit opened");
        } else if updated.circuit_state == "half_open" {
            // A permanent answer to the trial still shows the receiver is up.
            self.store.endpoint_succeeded(&endpoint.id, now).await?;
        }
        let dead_lettered = matches!(transition, Transition::Failed | Transition::Expired);
        let failing_for = updated
            .failing_since
            .map(|since| Timestamp(since).until(now));
        let reason = if verdict == Verdict::Gone {
            Some("the endpoint answered 410 Gone".to_string())
        } else if updated.failure_streak >= self.settings.dead_streak {
            Some(format!(
                "{} permanent failures in a row",
                updated.failure_streak
            ))
        } else if dead_lettered && failing_for.is_some_and(|d| d >= self.settings.dead_after) {
            Some("no successful delivery for 24 hours while deliveries dead-letter".to_string())
        } else {
            None
        };
        if let Some(reason) = reason {
            if self
                .store
                .pause_dead_endpoint(&endpoint.id, &reason, now)
                .await?
            {
                tracing::warn!(endpoint = %endpoint.id, reason = %reason, "endpoint paused");
                let subject = format!("Endpoint paused: {}", endpoint.url);
                let body = format!(
                    "We paused deliveries to {} because {reason}. New events keep queueing; \
                     resume the endpoint once the receiver is fixed and the queue drains.",
                    endpoint.url
                );
                self.store
                    .add_notification(
                        &endpoint.account_id,
                        Some(&endpoint.id),
                        "endpoint_paused",
                        &subject,
                        &body,
                        now,
                    )
                    .await?;
            }
        }
        Ok(())
    }

    /// Returns when the next start frees up if this one would exceed the
    /// endpoint's `rate_limit_per_sec`; retries spend the same budget.
    async fn over_rate_limit(
        &self,
        endpoint: &Endpoint,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, StoreError> {
        let Some(limit) = endpoint.rate_limit_per_sec.filter(|l| *l > 0) else {
            return Ok(None);
        };
        self.store
            .take_rate_slot(
                &format!("start:{}", endpoint.id),
                Duration::from_secs(1),
                limit,
                now,
            )
            .await
    }
}

fn record_metrics(
    delivery: &Delivery,
    sent: &Sent,
    verdict: Verdict,
    transition: Transition,
    started: Timestamp,
) {
    let seconds = |ms: i64| ms.max(0) as f64 / 1000.0;
    metrics::counter!(
        "dakghar_attempts_total",
        "outcome" => verdict.as_str(),
        "status_class" => crate::metrics::status_class(sent.status)
    )
    .increment(1);
    metrics::histogram!("dakghar_request_seconds").record(sent.duration.as_secs_f64());
    metrics::histogram!("dakghar_attempt_delay_seconds")
        .record(seconds(started.millis() - delivery.next_attempt_at));
    match transition {
        Transition::Retry { .. } => metrics::counter!("dakghar_retries_total").increment(1),
        Transition::Delivered => {
            if delivery.attempts > 0 {
                metrics::counter!("dakghar_delivered_after_retry_total").increment(1);
            }
            metrics::histogram!("dakghar_delivery_delay_seconds")
                .record(seconds(started.millis() - delivery.created_at));
        }
        Transition::Failed => {
            metrics::counter!("dakghar_dead_lettered_total", "reason" => "failed").increment(1)
        }
        Transition::Expired => {
            metrics::counter!("dakghar_dead_lettered_total", "reason" => "expired").increment(1)
        }
    }
}
