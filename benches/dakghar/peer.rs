//! A peer on the same burn-down: graphile-worker 0.17.3 (installed under
//! .tools by `make bench`, with undici for its HTTP) delivering the same
//! 1 KB signed bodies to the same receiver from the same Postgres, batching
//! on. Its script is bench/peers/graphile-worker/run.mjs.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use crate::{cpu, receiver::Receiver, wal};

pub struct PeerRun {
    pub deliveries: usize,
    pub per_sec: f64,
    /// Over the burn-down only; "server" is the node process.
    pub cpu: cpu::PerDelivery,
    pub wal: Option<wal::PerDelivery>,
    pub peak_rss_mib: f64,
}

/// None, said on stderr, when node or graphile-worker is missing or the run
/// fails: the peer is a comparison, never a reason to lose Dakghar's figures.
pub async fn graphile_worker(
    pg_url: &str,
    rx: &Receiver,
    events: usize,
    endpoints: usize,
) -> Option<PeerRun> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tools =
        std::env::var_os("DAKGHAR_TOOLS").map_or_else(|| root.join(".tools"), PathBuf::from);
    for package in ["graphile-worker", "undici"] {
        if !tools.join("node_modules").join(package).exists() {
            eprintln!(
                "graphile-worker peer skipped: no {package} under {} (make bench installs it)",
                tools.display()
            );
            return None;
        }
    }
    let dir = root.join("bench/peers/graphile-worker");
    let spawned = Command::new("node")
        .arg(dir.join("run.mjs"))
        .arg("--database-url")
        .arg(pg_url)
        .arg("--receiver-url")
        .arg(&rx.fast_url)
        .arg("--events")
        .arg(events.to_string())
        .arg("--endpoints")
        .arg(endpoints.to_string())
        .env("DAKGHAR_TOOLS", &tools)
        // No graphile-worker config file from wherever the bench was started.
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let child = match spawned {
        Ok(child) => child,
        Err(e) => {
            eprintln!("graphile-worker peer skipped: cannot start node: {e}");
            return None;
        }
    };
    let (rx, url) = (rx.clone(), pg_url.to_string());
    // std::process on a blocking thread: the workspace's tokio has neither
    // the `process` nor the `io-util` feature, and the samples must be taken
    // the moment the script's lines arrive.
    tokio::task::spawn_blocking(move || watch(child, &rx, &url))
        .await
        .unwrap_or_else(|e| {
            eprintln!("graphile-worker peer failed: {e}");
            None
        })
}

/// Samples CPU when the script says `START` (its enqueue excluded) and when
/// it prints its result (its shutdown and cleanup excluded), and
/// Postgres's WAL counters likewise.
fn watch(mut child: std::process::Child, rx: &Receiver, pg_url: &str) -> Option<PeerRun> {
    let pid = child.id();
    let wal_mark = || tokio::runtime::Handle::current().block_on(wal::mark(Some(pg_url)));
    let stdout = child.stdout.take()?;
    let mut start = None;
    let mut result = None;
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        if line == "START" {
            start = Some((cpu::sample(pid), rx.count(), wal_mark()));
        } else if let Ok(json @ serde_json::Value::Object(_)) = serde_json::from_str(&line) {
            result = Some((json, cpu::sample(pid), rx.count(), wal_mark()));
        }
    }
    let status = child.wait();
    if !status.as_ref().is_ok_and(|s| s.success()) {
        eprintln!("graphile-worker peer exited badly: {status:?}");
    }
    let (Some((cpu_before, rx_before, wal_before)), Some((json, cpu_after, rx_after, wal_after))) =
        (start, result)
    else {
        eprintln!("graphile-worker peer failed: no START and result from run.mjs");
        return None;
    };
    let field = |name: &str| json.get(name).and_then(serde_json::Value::as_f64);
    let (Some(deliveries), Some(per_sec), Some(peak_rss)) = (
        field("deliveries"),
        field("per_sec"),
        field("peak_rss_bytes"),
    ) else {
        eprintln!("graphile-worker peer failed: unexpected result {json}");
        return None;
    };
    let deliveries = deliveries as usize;
    let received = rx_after - rx_before;
    if received != deliveries {
        eprintln!("graphile-worker peer: {deliveries} delivered but the receiver saw {received}");
    }
    Some(PeerRun {
        deliveries,
        per_sec,
        cpu: cpu::per_delivery(cpu_before, cpu_after, deliveries),
        wal: wal::per_delivery(wal_before, wal_after, deliveries),
        peak_rss_mib: peak_rss / (1024.0 * 1024.0),
    })
}
