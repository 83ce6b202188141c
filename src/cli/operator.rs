//! The commands an operator runs against an installation's database:
//! `status` (what the queue and the nodes are doing now) and `events
//! export` (an account's history as JSON Lines, the retention archive's
//! format).

use std::{collections::HashMap, io::Write};

use crate::{
    clock::Timestamp,
    jobs::{heartbeat, retention::history_line},
    store::{Delivery, Node, Store},
};

/// A node silent for this long is called gone.
const GONE_AFTER_MS: i64 = 3 * heartbeat::EVERY.as_millis() as i64;

fn alive(node: &Node, now: Timestamp) -> bool {
    now.millis() - node.seen_at <= GONE_AFTER_MS
}

pub async fn status(store: &Store, now: Timestamp, json: bool) -> Result<String, String> {
    let e = |e: crate::store::StoreError| e.to_string();
    let gauges = store.queue_gauges(now).await.map_err(e)?;
    let day_ago = Timestamp(now.millis() - 24 * 3_600_000);
    let dead = store.dead_letters_since(day_ago).await.map_err(e)?;
    let paused = store.paused_endpoints().await.map_err(e)?;
    let nodes = store.nodes().await.map_err(e)?;
    let mut held = store.in_flight_by_node().await.map_err(e)?;
    if json {
        let nodes: Vec<_> = nodes
            .iter()
            .map(|n| {
                serde_json::json!({
                    "id": n.id, "role": n.role, "host": n.host, "pid": n.pid,
                    "version": n.version,
                    "started_at": Timestamp(n.started_at).to_rfc3339(),
                    "seen_at": Timestamp(n.seen_at).to_rfc3339(),
                    "alive": alive(n, now),
                    "in_flight": held.get(&n.id).copied().unwrap_or(0),
                })
            })
            .collect();
        let out = serde_json::json!({
            "pending": gauges.pending,
            "in_flight": gauges.in_flight,
            "dead_letters_24h": dead,
            "circuits_open": gauges.circuits_open,
            "endpoints_paused": paused,
            "endpoints_throttled": gauges.throttled,
            "nodes": nodes,
        });
        return Ok(format!("{out}\n"));
    }
    let mut out = String::new();
    out.push_str(&format!(
        "queue          {} pending, {} in flight\n",
        gauges.pending, gauges.in_flight
    ));
    out.push_str(&format!("dead letters   {dead} in the last 24 h\n"));
    out.push_str(&format!(
        "endpoints      {} circuits open, {} paused, {} throttled\n",
        gauges.circuits_open, paused, gauges.throttled
    ));
    out.push_str(&format!("nodes          {}\n", nodes.len()));
    for n in &nodes {
        let in_flight = held.remove(&n.id).unwrap_or(0);
        let state = if alive(n, now) {
            format!("up since {}", Timestamp(n.started_at).to_rfc3339())
        } else {
            format!("gone, last seen {}", Timestamp(n.seen_at).to_rfc3339())
        };
        out.push_str(&format!(
            "  {}  {:<6} {} pid {}  v{}  {}  {} in flight\n",
            n.id, n.role, n.host, n.pid, n.version, state, in_flight
        ));
    }
    let unknown: i64 = held.values().sum();
    if unknown > 0 {
        out.push_str(&format!(
            "  {unknown} in flight held by nodes the database no longer lists\n"
        ));
    }
    Ok(out)
}

/// Writes the account's events created in [since, until), oldest first,
/// one line per delivery (an event without any: one line, no delivery).
pub async fn export(
    store: &Store,
    account_id: &str,
    since: Option<Timestamp>,
    until: Option<Timestamp>,
    out: &mut impl Write,
) -> Result<u64, String> {
    let e = |e: crate::store::StoreError| e.to_string();
    let mut after: Option<(i64, String)> = None;
    let mut lines = 0;
    loop {
        let page = store
            .events_between(account_id, since, until, after.as_ref(), 500)
            .await
            .map_err(e)?;
        let Some(last) = page.last() else {
            return Ok(lines);
        };
        after = Some((last.created_at, last.id.clone()));
        let ids: Vec<&str> = page.iter().map(|ev| ev.id.as_str()).collect();
        let mut by_event: HashMap<String, Vec<Delivery>> = HashMap::new();
        for d in store
            .deliveries_of_events(account_id, &ids)
            .await
            .map_err(e)?
        {
            by_event.entry(d.event_id.clone()).or_default().push(d);
        }
        for event in &page {
            let deliveries = by_event.remove(&event.id).unwrap_or_default();
            let mut written = Vec::new();
            for d in &deliveries {
                let attempts = store.attempts_of_delivery(&d.id).await.map_err(e)?;
                written.push(history_line(event, Some(d), &attempts));
            }
            if deliveries.is_empty() {
                written.push(history_line(event, None, &[]));
            }
            for line in written {
                writeln!(out, "{line}").map_err(|e| format!("cannot write: {e}"))?;
                lines += 1;
            }
        }
    }
}
