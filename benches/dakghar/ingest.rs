//! Ingest over HTTP as producers drive it: 32 keep-alive producers posting
//! as fast as they are answered, at a fan-out of 10. Once into a node that
//! runs no workers (ingest alone), once into a node that delivers all it
//! ingests meanwhile (the mixed load), which is then timed until the queue
//! is empty: how far delivery fell behind the producers. Then the same
//! node takes the mixed load paced at the goal's rate (open loop, each
//! event posted at its scheduled time): whether it delivers 1 000 events
//! a second as they come, which the producers' own pace does not ask.

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

/// The paced mixed load's rate: the goal's, in events a second.
pub const PACED_PER_SEC: f64 = 1000.0;

pub struct Figures {
    pub events: usize,
    /// Events per second with no worker running.
    pub alone_per_sec: f64,
    pub alone_cpu: cpu::PerDelivery,
    /// The producers as fast as they are answered, while the node delivers.
    pub mixed: Mixed,
    /// The producers at `PACED_PER_SEC`, while the node delivers.
    pub paced: Mixed,
}

/// Ingest into a node that delivers meanwhile.
pub struct Mixed {
    /// Events per second, from the first post to the last answer.
    pub per_sec: f64,
    /// Deliveries per second from the first post to the last delivery.
    pub deliveries_per_sec: f64,
    /// From the last answered post to the last delivery.
    pub behind: Duration,
    /// Deliveries still queued when the producers stopped.
    pub left: usize,
    /// How long after its scheduled time the last post was answered
    /// (paced only).
    pub late: Duration,
}

pub async fn run(backend: &Backend, rx: &Receiver, events: usize, dir: &Path) -> Figures {
    let db = BenchDb::new(backend).await;
    let account = seed::account(&db.store, FAN_OUT, &rx.fast_url, 64).await;
    let key = seed::key(&db.store, &account).await;

    let node = Server::start(&db.child_url, &["--role", "api"], dir).await;
    let before = cpu::sample(node.pid());
    let took = produce(&node.base, &key, events, "alone", None).await;
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
    let mixed = post_while_delivering(&node, rx, &key, events, "mixed", None).await;
    let paced = post_while_delivering(&node, rx, &key, events, "paced", Some(PACED_PER_SEC)).await;
    node.stop().await;
    db.finish().await;
    Figures {
        events,
        alone_per_sec,
        alone_cpu,
        mixed,
        paced,
    }
}

/// Posts `events` into `node` (at `pace` events a second, if given) and
/// waits until the receiver has every delivery.
async fn post_while_delivering(
    node: &Server,
    rx: &Receiver,
    key: &str,
    events: usize,
    tag: &str,
    pace: Option<f64>,
) -> Mixed {
    let start = Instant::now();
    let delivered_before = rx.count();
    let want = events * FAN_OUT;
    let took = produce(&node.base, key, events, tag, pace).await;
    let left = want.saturating_sub(rx.count() - delivered_before);
    let posted = Instant::now();
    let deadline = posted + Duration::from_secs(600);
    while rx.count() - delivered_before < want {
        assert!(Instant::now() < deadline, "the {tag} load stalled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let behind = posted.elapsed();
    let all = start.elapsed();
    let late = pace.map_or(Duration::ZERO, |rate| {
        took.saturating_sub(Duration::from_secs_f64((events - 1) as f64 / rate))
    });
    eprintln!(
        "  {tag}: {events} events in {:.1}s, delivered {:.1}s later",
        took.as_secs_f64(),
        behind.as_secs_f64()
    );
    Mixed {
        per_sec: events as f64 / took.as_secs_f64(),
        deliveries_per_sec: want as f64 / all.as_secs_f64(),
        behind,
        left,
        late,
    }
}

/// Posts `events` events from `PRODUCERS` keep-alive producers, each
/// sending its next once the last was answered, and with `pace` not before
/// the next's scheduled time (event `i` at `i / pace` s); returns how long
/// it took.
async fn produce(base: &str, key: &str, events: usize, tag: &str, pace: Option<f64>) -> Duration {
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
                if let Some(rate) = pace {
                    let at = start + Duration::from_secs_f64(i as f64 / rate);
                    tokio::time::sleep_until(at.into()).await;
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
