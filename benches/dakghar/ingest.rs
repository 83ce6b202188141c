//! Ingest over HTTP as producers drive it: 32 keep-alive producers posting
//! as fast as they are answered, at a fan-out of 10. Once into a node that
//! runs no workers (ingest alone), once into a node that delivers all it
//! ingests meanwhile (the mixed load), which is then timed until the queue
//! is empty: how far delivery fell behind the producers.

use std::{
    path::Path,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use crate::{
    cpu,
    db::{Backend, BenchDb},
    receiver::Receiver,
    seed,
    server::Server,
};

pub const PRODUCERS: usize = 32;
pub const FAN_OUT: usize = 10;

pub struct Figures {
    pub events: usize,
    /// Events per second with no worker running.
    pub alone_per_sec: f64,
    pub alone_cpu: cpu::PerDelivery,
    /// Events per second while the node delivers.
    pub mixed_per_sec: f64,
    /// Deliveries per second from the first post to the last delivery.
    pub mixed_deliveries_per_sec: f64,
    /// From the last answered post to the last delivery.
    pub mixed_behind: Duration,
    /// Deliveries still queued when the producers stopped.
    pub mixed_left: usize,
}

pub async fn run(backend: &Backend, rx: &Receiver, events: usize, dir: &Path) -> Figures {
    let db = BenchDb::new(backend).await;
    let account = seed::account(&db.store, FAN_OUT, &rx.fast_url, 64).await;
    let key = seed::key(&db.store, &account).await;

    let node = Server::start(&db.child_url, &["--role", "api"], dir).await;
    let before = cpu::sample(node.pid());
    let took = produce(&node.base, &key, events, "alone").await;
    let alone_cpu = cpu::per_delivery(before, cpu::sample(node.pid()), events * FAN_OUT);
    let alone_per_sec = events as f64 / took.as_secs_f64();
    eprintln!(
        "  ingest alone: {events} events in {:.1}s",
        took.as_secs_f64()
    );
    node.stop().await;
    // The backlog the first node left is not the mixed run's.
    db.store
        .execute_script("DELETE FROM deliveries")
        .await
        .unwrap();

    let node = Server::start(&db.child_url, &[], dir).await;
    let start = Instant::now();
    let delivered_before = rx.count();
    let want = events * FAN_OUT;
    let took = produce(&node.base, &key, events, "mixed").await;
    let mixed_left = want.saturating_sub(rx.count() - delivered_before);
    let posted = Instant::now();
    let deadline = posted + Duration::from_secs(600);
    while rx.count() - delivered_before < want {
        assert!(Instant::now() < deadline, "the mixed load stalled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mixed_behind = posted.elapsed();
    let all = start.elapsed();
    eprintln!(
        "  mixed: {events} events in {:.1}s, delivered {:.1}s later",
        took.as_secs_f64(),
        mixed_behind.as_secs_f64()
    );
    node.stop().await;
    db.finish().await;
    Figures {
        events,
        alone_per_sec,
        alone_cpu,
        mixed_per_sec: events as f64 / took.as_secs_f64(),
        mixed_deliveries_per_sec: want as f64 / all.as_secs_f64(),
        mixed_behind,
        mixed_left,
    }
}

/// Posts `events` events from `PRODUCERS` keep-alive producers, each
/// sending its next once the last was answered; returns how long it took.
async fn produce(base: &str, key: &str, events: usize, tag: &str) -> Duration {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(PRODUCERS)
        .build()
        .unwrap();
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut producers = Vec::new();
    for _ in 0..PRODUCERS {
        let (client, next, url, key, tag) = (
            client.clone(),
            Arc::clone(&next),
            format!("{base}/api/v1/events"),
            key.to_string(),
            tag.to_string(),
        );
        producers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= events {
                    return;
                }
                let body = format!(
                    r#"{{"id":"{tag}_{i}","type":"invoice.paid","payload":{}}}"#,
                    String::from_utf8(seed::payload(i)).unwrap()
                );
                let res = client
                    .post(&url)
                    .bearer_auth(&key)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                assert!(
                    res.status().is_success(),
                    "ingest answered {}",
                    res.status()
                );
            }
        }));
    }
    for p in producers {
        p.await.unwrap();
    }
    start.elapsed()
}
