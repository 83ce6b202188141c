//! `make bench`: Dakghar against this machine's own ceilings, on SQLite and
//! (when a Postgres URL is given) Postgres. A benchmark, not a test: it
//! prints figures and ratios and writes bench/results/<date>-<backend>.md.
//!
//! BENCH_SIZE=quick (100 k events × 1 endpoint, the default) or full
//! (100 k × 10); BENCH_DATABASE_URL (else TEST_DATABASE_URL) adds Postgres;
//! BENCH_BACKENDS=sqlite,postgres picks which run; BENCH_DASHBOARD=off
//! skips the dashboard (its million rows take a while) when comparing
//! engine changes.

mod ceiling;
mod cpu;
mod dashboard;
mod db;
mod delivery;
mod receiver;
mod report;
mod seed;
mod server;
mod stats;

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
        eprintln!("[{}] B_db: the store alone", backend.name());
        let db = BenchDb::new(backend).await;
        let (db_ingest, db_per_sec) =
            ceiling::db(&db.store, 20_000 / endpoints, endpoints, &rx.fast_url).await;
        db.finish().await;
        let db = BenchDb::new(backend).await;
        let db_latency = ceiling::db_latency(&db.store, endpoints, &rx.fast_url).await;
        db.finish().await;
        eprintln!(
            "[{}] the engine: memory, burn-down, latency",
            backend.name()
        );
        let delivery = delivery::run(backend, &rx, events, endpoints, logs.path()).await;
        let dashboard = if std::env::var("BENCH_DASHBOARD").as_deref() == Ok("off") {
            None
        } else {
            eprintln!("[{}] the dashboard at 1 M deliveries", backend.name());
            Some(dashboard::run(backend, &rx, logs.path()).await)
        };
        let text = report::render(&report::Run {
            backend,
            events,
            endpoints,
            http: &http,
            db_ingest,
            db_per_sec,
            db_latency: &db_latency,
            delivery: &delivery,
            dashboard: dashboard.as_ref(),
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
