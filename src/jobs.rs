//! Maintenance: the periodic jobs of a worker node, each named for what it
//! does, all started from `spawn` here.
//!
//! - `alerts`: writes the per-endpoint alerts into the outbox (every alert's
//!   words are in `alerts/texts.rs`, whoever writes them).
//! - `mailer`: sends the outbox by SMTP, when configured.
//! - `retention`: deletes (and optionally archives) old finished history.
//! - `vacuum`: vacuums `deliveries` on Postgres soon after heavy churn.
//! - `expired_links`: forgets ended single-use links and portal sessions.
//! - `deadlines`: expires paused endpoints' deliveries past their window.
//! - `lease_rescue`: returns deliveries whose lease ran out; the claim
//!   loops call it before they claim, at most once a second.

pub mod alerts;
pub mod deadlines;
pub mod expired_links;
pub mod heartbeat;
pub mod lease_rescue;
pub mod mailer;
pub mod retention;
pub mod vacuum;

use std::{future::Future, sync::Arc, time::Duration};

use tokio::{sync::Notify, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::{clock::SharedClock, store::Store};

/// The jobs of a worker node and how each is set.
pub struct Jobs {
    pub retention: retention::RetentionSettings,
    /// Without SMTP the outbox is only shown in the dashboard. The mailer
    /// sends every so often, and at once when woken (a personal email
    /// someone waits for).
    pub mail: Option<(mailer::Mailer, Duration, Arc<Notify>)>,
    pub alerts_every: Duration,
    /// Where users reach this installation: the links in alerts.
    pub public_url: String,
    pub vacuum: crate::store::VacuumPolicy,
}

/// Starts every job this node runs; each stops at `shutdown`.
pub fn spawn(
    store: &Store,
    clock: &SharedClock,
    jobs: Jobs,
    shutdown: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let mut running = vec![alerts::spawn(
        store.clone(),
        clock.clone(),
        jobs.alerts_every,
        jobs.public_url.clone(),
        shutdown.clone(),
    )];
    running.extend(retention::spawn(
        store.clone(),
        clock.clone(),
        jobs.retention,
        shutdown.clone(),
    ));
    running.push(expired_links::spawn(
        store.clone(),
        clock.clone(),
        Duration::from_secs(3600),
        shutdown.clone(),
    ));
    running.push(deadlines::spawn(
        store.clone(),
        clock.clone(),
        Duration::from_secs(60),
        shutdown.clone(),
    ));
    running.extend(vacuum::spawn(store.clone(), jobs.vacuum, shutdown.clone()));
    if let Some((mailer, every, wake)) = jobs.mail {
        running.push(mailer::spawn(
            mailer,
            store.clone(),
            clock.clone(),
            every,
            wake,
            shutdown.clone(),
        ));
    }
    running
}

/// Runs `pass` now and then every `every` until `shutdown`: the loop each
/// job shares.
pub(crate) fn every<F, Fut>(every: Duration, shutdown: CancellationToken, pass: F) -> JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    every_or_woken(every, None, shutdown, pass)
}

/// Like `every`, running again at once when `wake` is notified.
pub(crate) fn every_or_woken<F, Fut>(
    every: Duration,
    wake: Option<Arc<Notify>>,
    shutdown: CancellationToken,
    mut pass: F,
) -> JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        loop {
            pass().await;
            let woken = async {
                match &wake {
                    Some(wake) => wake.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
                _ = woken => {}
            }
        }
    })
}
