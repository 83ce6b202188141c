//! `make bench`: Dakghar against this machine's own ceilings, on SQLite and
//! (when a Postgres URL is given) Postgres. A benchmark, not a test: it
//! prints figures and ratios and writes bench/results/<date>-<backend>.md.
//!
//! BENCH_SIZE=quick (100 k events × 1 endpoint, the default) or full
//! (100 k × 10); BENCH_DATABASE_URL (else TEST_DATABASE_URL) adds Postgres;
//! BENCH_BACKENDS=sqlite,postgres picks which run; BENCH_PARTS picks the
//! parts (engine, ingest, claims, peer, dashboard; all by default) when
//! comparing one change; BENCH_DASHBOARD=off drops the dashboard (its
//! million rows take a while). On Postgres the WAL figures are the whole
//! server's: run the bench on a Postgres nothing else writes to. Where
//! that Postgres preloads pg_stat_statements (and the database has the
//! extension), the results also say which statements its time went to.

mod ceiling;
mod claims;
mod cpu;
mod dashboard;
mod db;
mod delivery;
mod disk;
mod ingest;
mod maintenance;
mod peer;
mod receiver;
mod report;
mod seed;
mod server;
mod statements;
mod stats;
mod wal;

use std::time::Duration;

use db::{Backend, BenchDb};

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let (events, endpoints) = match std::env::var("BENCH_SIZE").as_deref() {
        Ok("full") => (100_000, 10),
        Ok("quick") | Err(_) => (100_000, 1),
        Ok(other) => panic!("BENCH_SIZE must be quick or full, not {other:?}"),
    };
    let pg = ["BENCH_DATABASE_URL", "TEST_DATABASE_URL"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()));
    let wanted = std::env::var("BENCH_BACKENDS").unwrap_or_else(|_| "sqlite,postgres".into());
    let mut backends = Vec::new();
    if wanted.contains("sqlite") {
        backends.push(Backend::Sqlite);
    }
    match pg {
        Some(url) if wanted.contains("postgres") => backends.push(Backend::Postgres(url)),
        None if wanted.contains("postgres") => {
            eprintln!("Postgres skipped: set BENCH_DATABASE_URL or TEST_DATABASE_URL")
        }
        _ => {}
    }
    let logs = tempfile::tempdir().unwrap();
    let rx = receiver::Receiver::start().await;
    eprintln!("B_http: raw reqwest against the receiver");
    let http = ceiling::http(&rx, Duration::from_secs(5)).await;
    let results = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    std::fs::create_dir_all(&results).unwrap();
    for backend in &backends {
        let machine_before = cpu::Machine::now();
        eprintln!("[{}] B_db: the store alone", backend.name());
        let db = BenchDb::new(backend).await;
        let (db_ingest, db_per_sec) =
            ceiling::db(&db.store, 20_000 / endpoints, endpoints, &rx.fast_url).await;
        db.finish().await;
        let db = BenchDb::new(backend).await;
        let db_latency = ceiling::db_latency(&db.store, endpoints, &rx.fast_url).await;
        db.finish().await;
        let part = |name: &str| {
            let parts = std::env::var("BENCH_PARTS").unwrap_or_default();
            let dashboard_off = std::env::var("BENCH_DASHBOARD").as_deref() == Ok("off");
            (parts.is_empty() || parts.split(',').any(|p| p.trim() == name))
                && !(name == "dashboard" && dashboard_off)
        };
        let delivery = if part("engine") {
            eprintln!(
                "[{}] the engine: memory, burn-down, latency",
                backend.name()
            );
            Some(delivery::run(backend, &rx, events, endpoints, logs.path()).await)
        } else {
            None
        };
        let ingest = if part("ingest") {
            eprintln!("[{}] ingest over HTTP, alone and mixed", backend.name());
            Some(ingest::run(backend, &rx, 20_000, logs.path()).await)
        } else {
            None
        };
        let claims = if part("claims") {
            eprintln!("[{}] claims alone, 1 M queued", backend.name());
            Some(claims::run(backend, 1_000_000, 1_000, &rx.fast_url).await)
        } else {
            None
        };
        let peer = match backend {
            Backend::Postgres(url) if part("peer") => {
                eprintln!("[postgres] the peer's size: 5 000 × 10, Dakghar then graphile-worker");
                let ours = delivery::burn_only(backend, &rx, 5_000, 10, logs.path()).await;
                peer::graphile_worker(url, &rx, 5_000, 10)
                    .await
                    .map(|theirs| (theirs, ours))
            }
            _ => None,
        };
        let dashboard = if part("dashboard") {
            eprintln!("[{}] the dashboard at 1 M deliveries", backend.name());
            Some(dashboard::run(backend, &rx, logs.path()).await)
        } else {
            None
        };
        let text = report::render(&report::Run {
            backend,
            events,
            endpoints,
            http: &http,
            db_ingest,
            db_per_sec,
            db_latency: &db_latency,
            delivery: delivery.as_ref(),
            ingest: ingest.as_ref(),
            claims: claims.as_ref(),
            peer: peer.as_ref().map(|(theirs, ours)| (theirs, ours)),
            dashboard: dashboard.as_ref(),
            stolen: cpu::Machine::now().stolen_since(&machine_before),
        });
        println!("{text}");
        let file = results.join(format!(
            "{}-{}.md",
            chrono::Utc::now().format("%Y-%m-%d"),
            backend.name()
        ));
        std::fs::write(&file, text).unwrap();
        eprintln!("written to {}", file.display());
    }
}
