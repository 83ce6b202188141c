//! The two ceilings every Dakghar figure is compared with: what raw HTTP to
//! the receiver does, and what Dakghar's own SQL per delivery does with no
//! HTTP at all.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use dakghar::{
    clock::{Clock, SystemClock},
    store::{Completion, Store, Transition},
};

use crate::{
    receiver::Receiver,
    seed,
    stats::{spread, Spread},
};

pub struct Http {
    /// Requests per second with 64 in flight on keep-alive connections.
    pub per_sec: f64,
    /// One request at a time.
    pub latency: Spread,
}

pub async fn http(rx: &Receiver, run_for: Duration) -> Http {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    let body = seed::payload(0);
    // Warm the connections first.
    for _ in 0..64 {
        client
            .post(&rx.fast_url)
            .body(body.clone())
            .send()
            .await
            .unwrap();
    }
    let done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (client, body, url, done) = (
            client.clone(),
            body.clone(),
            rx.fast_url.clone(),
            Arc::clone(&done),
        );
        tasks.push(tokio::spawn(async move {
            while start.elapsed() < run_for {
                let res = client.post(&url).body(body.clone()).send().await.unwrap();
                assert_eq!(res.status(), 204);
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let per_sec = done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    let mut samples = Vec::with_capacity(2000);
    for _ in 0..2000 {
        let t = Instant::now();
        client
            .post(&rx.fast_url)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        samples.push(t.elapsed());
    }
    Http {
        per_sec,
        latency: spread(samples),
    }
}

/// Deliveries per second through the store alone: ingest, claim in the
/// engine's batches, the reads an attempt makes, recording the attempt and
/// the endpoint's health. Returns (ingest per second, deliveries per second).
pub async fn db(store: &Store, events: usize, endpoints: usize, url: &str) -> (f64, f64) {
    let account = seed::account(store, endpoints, url, 64).await;
    let start = Instant::now();
    seed::queue(store, &account.id, events, "bdb").await;
    let ingest_time = start.elapsed();
    let total = events * endpoints;
    let delivered = Arc::new(AtomicUsize::new(0));
    // As many claim loops as the engine runs by default.
    let mut loops = Vec::new();
    for _ in 0..4 {
        let (store, delivered) = (store.clone(), Arc::clone(&delivered));
        loops.push(tokio::spawn(async move {
            loop {
                let now = SystemClock.now();
                let dakghar::store::Claim {
                    deliveries: claimed,
                    read_along,
                    ..
                } = store
                    .claim(
                        now,
                        now.plus(Duration::from_secs(300)),
                        100,
                        dakghar::store::ClaimRules::default(),
                    )
                    .await
                    .unwrap();
                if claimed.is_empty() {
                    // Another loop may hold every slot for a moment; the
                    // engine would sleep here too, not spin.
                    if delivered.load(Ordering::Relaxed) >= total {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                }
                // What the engine does with a claimed batch, minus the HTTP.
                let inputs = store.batch_inputs(&claimed, read_along).await.unwrap();
                assert_eq!(inputs.events.len(), claimed.len());
                let now = SystemClock.now();
                let batch: Vec<Completion> = claimed
                    .into_iter()
                    .map(|d| Completion {
                        record: seed::attempt_record(&d, now),
                        claimed: d,
                        transition: Transition::Delivered,
                        now,
                    })
                    .collect();
                for answer in store.complete_attempts(&batch).await.unwrap() {
                    answer.unwrap();
                    delivered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for l in loops {
        l.await.unwrap();
    }
    assert_eq!(
        delivered.load(Ordering::Relaxed),
        total,
        "B_db lost deliveries"
    );
    let all = start.elapsed();
    (
        events as f64 / ingest_time.as_secs_f64(),
        total as f64 / all.as_secs_f64(),
    )
}

/// The storage floor under one event's latency, one call at a time on an
/// idle database: a bare one-row commit, and `insert_event` (the ingest
/// transaction) for one event.
pub struct DbLatency {
    pub commit: Spread,
    pub ingest: Spread,
}

pub async fn db_latency(store: &Store, endpoints: usize, url: &str) -> DbLatency {
    const N: usize = 500;
    store
        .execute_script("CREATE TABLE bench_commit (n BIGINT)")
        .await
        .unwrap();
    let mut commit = Vec::with_capacity(N);
    for _ in 0..N {
        let t = Instant::now();
        store
            .execute_script("INSERT INTO bench_commit VALUES (1)")
            .await
            .unwrap();
        commit.push(t.elapsed());
    }
    let account = seed::account(store, endpoints, url, 64).await;
    let mut ingest = Vec::with_capacity(N);
    for i in 0..N {
        let now = SystemClock.now();
        let event = dakghar::store::NewEvent {
            account_id: account.id.clone(),
            id: format!("one_{i}"),
            event_type: "invoice.paid".into(),
            payload: seed::payload(i),
        };
        let t = Instant::now();
        store
            .insert_event(event, now, now.plus(Duration::from_secs(3600)))
            .await
            .unwrap();
        ingest.push(t.elapsed());
    }
    DbLatency {
        commit: spread(commit),
        ingest: spread(ingest),
    }
}
