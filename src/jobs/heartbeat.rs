//! Each serving process keeps its row in `nodes` fresh, so `dakghar
//! status` can say which nodes there are and what each holds.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::{
    clock::SharedClock,
    store::{Node, Store},
};

/// How often a node says it is alive; `dakghar status` calls one silent
/// for three times this long gone.
pub const EVERY: Duration = Duration::from_secs(10);

/// This process as a node: a fresh id, what it runs, where.
pub fn this_process(role: &str, started_at: i64) -> Node {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into());
    Node {
        id: crate::ids::new_id("node"),
        role: role.to_string(),
        host,
        pid: i64::from(std::process::id()),
        version: env!("CARGO_PKG_VERSION").to_string(),
        started_at,
        seen_at: started_at,
    }
}

pub fn spawn(
    store: Store,
    clock: SharedClock,
    node: Node,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    super::every(EVERY, shutdown, move || {
        let (store, clock, mut node) = (store.clone(), clock.clone(), node.clone());
        async move {
            node.seen_at = clock.now().millis();
            if let Err(e) = store.node_seen(&node).await {
                tracing::debug!(error = %e, "could not refresh this node's row");
            }
        }
    })
}
