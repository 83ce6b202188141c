//! The embedded workers (SPEC §4): the engine's parts, how it is woken
//! (here, and on Postgres on every node), and how it starts and stops.
//! Beside it: `claim_loop.rs` (claiming and settling rounds),
//! `attempt.rs` (one attempt), `decision.rs` (what comes after it, pure)
//! and `endpoint_health.rs` (the circuit breaker and dead endpoints).

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use tokio::{
    sync::{Notify, Semaphore},
    task::AbortHandle,
};
use tokio_util::sync::CancellationToken;

use super::{recorder::Recorder, request, settings::DeliverySettings};
use crate::{
    clock::SharedClock,
    jobs::lease_rescue::LeaseRescuer,
    store::{Delivery, Store},
};

/// The most one claim loop takes at once, as semaphore permits.
pub(super) fn batch_permits(settings: &DeliverySettings) -> u32 {
    u32::try_from(settings.batch_size.max(1)).unwrap_or(u32::MAX)
}

/// How many deliveries a node holds claimed at once, across its loops.
pub(super) fn room_size(settings: &DeliverySettings) -> u32 {
    batch_permits(settings)
        .saturating_mul(u32::try_from(settings.workers.max(1)).unwrap_or(u32::MAX))
}

/// The target of every log line the engine writes, whichever of its files
/// writes it, so `RUST_LOG=dakghar::delivery::engine=…` covers it all.
pub(super) const LOG_TARGET: &str = "dakghar::delivery::engine";

/// Runs before each request; tests use it to plant worker faults.
pub type FaultHook = Arc<dyn Fn(&Delivery) + Send + Sync>;

pub struct Engine {
    pub(super) store: Store,
    pub(super) clock: SharedClock,
    pub(super) client: reqwest::Client,
    pub(super) settings: DeliverySettings,
    pub(super) wake: Arc<Notify>,
    /// A claim since the last settled round held due work back for want
    /// of a slot (`store::Claim`): the next round to settle frees slots,
    /// so it wakes a loop to claim again. Engine-wide, because the round
    /// that frees an endpoint's slot need not be the one whose claim
    /// found it full.
    pub(super) held_back: AtomicBool,
    /// The claim loops run (from `spawn` until shutdown): ingest groups
    /// may lease for them (`store::Workers`).
    pub(super) accepting: AtomicBool,
    /// This engine's name in work announcements, to skip its own.
    node_id: String,
    /// An announcement is queued and not yet sent: later events ride on it.
    announcing: Arc<AtomicBool>,
    /// This node's workers listen for work: they are woken directly, and
    /// hear other nodes' hellos.
    listening: AtomicBool,
    /// When another node's workers last said they listen.
    peers: Peers,
    pub(super) recorder: Recorder,
    pub(super) rescuer: LeaseRescuer,
    /// Claimed and not yet settled deliveries, one permit each.
    pub(super) room: Arc<Semaphore>,
    /// Attempts under way, so shutdown can hand back what misses the grace period.
    pub(super) running: Mutex<HashMap<String, (Delivery, AbortHandle)>>,
    /// Attempts started whose tasks have not ended (their results not yet
    /// committed), so the recorder knows when more results are coming.
    pub(super) under_way: Arc<AtomicUsize>,
    pub(super) fault_hook: Mutex<Option<FaultHook>>,
    pub(super) telemetry: Arc<crate::telemetry::Telemetry>,
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
        telemetry: Arc<crate::telemetry::Telemetry>,
    ) -> reqwest::Result<Arc<Engine>> {
        let under_way = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&under_way);
        Ok(Arc::new(Engine {
            client: request::client(&settings)?,
            room: Arc::new(Semaphore::new(room_size(&settings) as usize)),
            recorder: Recorder::start(store.clone(), move || counted.load(Ordering::Acquire)),
            rescuer: LeaseRescuer::new(store.clone()),
            store,
            clock,
            settings,
            wake: Arc::new(Notify::new()),
            held_back: AtomicBool::new(false),
            accepting: AtomicBool::new(false),
            node_id: crate::ids::random_token(16),
            announcing: Arc::new(AtomicBool::new(false)),
            listening: AtomicBool::new(false),
            peers: Peers::default(),
            running: Mutex::new(HashMap::new()),
            under_way,
            fault_hook: Mutex::new(None),
            telemetry,
        }))
    }

    pub(super) fn room_size(&self) -> u32 {
        room_size(&self.settings)
    }

    /// The trace spans this engine records (tests flush them).
    pub fn telemetry(&self) -> &Arc<crate::telemetry::Telemetry> {
        &self.telemetry
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
        // A node whose own workers were just woken tells others only if
        // some listen: alone, each announcement was a statement and a
        // commit an ingest group (about one an event at 10 % load), heard
        // by no one but itself.
        let alone = self.listening.load(Ordering::Acquire) && !self.peers.heard_lately();
        if !self.store.has_other_nodes() || alone {
            return;
        }
        // The producer does not wait for the NOTIFY round trip. While one is
        // queued, later events skip theirs: the queued one clears the flag
        // before it is sent, so it goes out after every event that skipped.
        if self.announcing.swap(true, Ordering::AcqRel) {
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

    pub(super) fn running_set(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (Delivery, AbortHandle)>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes this node's workers whenever any node announces new work, and
    /// says every `HELLO_EVERY` that this node listens.
    pub(super) async fn listen(self: Arc<Self>, shutdown: CancellationToken) {
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
        let hello = format!("{}{HELLO}", self.node_id);
        let mut hellos = tokio::time::interval(HELLO_EVERY);
        hellos.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        self.listening.store(true, Ordering::Release);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                // Sent beside the listener, which keeps reading meanwhile.
                _ = hellos.tick() => {
                    let (store, hello) = (self.store.clone(), hello.clone());
                    tokio::spawn(async move {
                        if let Err(e) = store.announce_work_from(&hello).await {
                            tracing::warn!(error = %e, "could not tell other nodes this one listens");
                        }
                    });
                }
                // recv reconnects by itself after a dropped connection.
                got = listener.recv() => match got {
                    // Our own news: wake() already woke a worker here, and
                    // a second one would only claim nothing.
                    Ok(n) if n.payload() == self.node_id || n.payload() == hello => {}
                    // Only a node with workers says hello, and a hello is
                    // no work: nothing to claim yet.
                    Ok(n) if n.payload().ends_with(HELLO) => self.peers.heard(),
                    Ok(_) => self.wake.notify_one(),
                    Err(e) => {
                        // Deaf meanwhile: announce, as peers may listen.
                        self.listening.store(false, Ordering::Release);
                        tracing::warn!(error = %e, "listening for work failed; retrying");
                        tokio::select! {
                            _ = shutdown.cancelled() => break,
                            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                        self.listening.store(true, Ordering::Release);
                    }
                },
            }
        }
        // Stopping: work that arrives now is for other nodes' workers.
        self.listening.store(false, Ordering::Release);
    }
}

/// How often a node with workers says on the work channel that it
/// listens, and the payload's end that marks it (after the node's name).
const HELLO_EVERY: Duration = Duration::from_secs(10);
const HELLO: &str = ".hello";

/// When another node's hello was last heard on the work channel. Heard
/// within three hellos, its workers are taken to listen. (A node of the
/// version before hellos is not heard: until it is replaced, its workers
/// find new work from other nodes by their poll.)
#[derive(Debug, Default)]
struct Peers(Mutex<Option<std::time::Instant>>);

impl Peers {
    fn heard(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
    }

    fn heard_lately(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|at| at.elapsed() <= HELLO_EVERY * 3)
    }
}
