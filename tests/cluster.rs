//! Scale-out on Postgres with real processes: three worker nodes share one
//! queue, one is killed with SIGKILL mid-run, and nothing is lost, nothing
//! is claimed twice, no endpoint ever sees more than its max_in_flight, and
//! one receiver host shared by two accounts' endpoints never sees more
//! than the per-host cap.
//!
//! A test binary of its own: cargo runs binaries one after another, so its
//! three busy nodes do not share the CPU with the timing-sensitive tests in
//! `it`. It borrows that suite's fixtures.
// Not every fixture of the shared files is used here.
#![allow(dead_code, unused_macros)]

#[macro_use]
#[path = "it/helpers.rs"]
mod helpers;
#[path = "it/receiver.rs"]
mod receiver;

use std::{
    collections::HashMap,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use dakghar::{
    clock::{Clock, SystemClock},
    store::{DeliveryState, NewEndpoint, NewEvent},
};

use crate::{helpers::TestDb, receiver::Receiver};

const BIN: &str = env!("CARGO_BIN_EXE_dakghar");
/// Enough that all three nodes are busy when one is killed, with a third
/// of the work left for the other two (62 000 deliveries took 270 s of a
/// 2-core machine and proved nothing more).
const EVENTS: usize = 3_000;
const ENDPOINTS: usize = 5;
const MAX_IN_FLIGHT: i64 = 3;
/// The nodes' `--max-in-flight-per-host`, below what the two endpoints on
/// the shared receiver allow together.
const HOST_CAP: i64 = 4;
const SHARED_MAX_IN_FLIGHT: i64 = 3;
/// Events of the second account, for its endpoint on the shared receiver.
const OTHER_EVENTS: usize = 600;

fn node(url: &str) -> Child {
    Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--role",
            "worker",
            "--workers",
            "4",
        ])
        .args(["--request-timeout", "2s", "--lease", "7s"])
        // Pacing per endpoint is not what this test is about.
        .args(["--default-rate-limit", "unlimited"])
        .args(["--ingest-rate-limit", "unlimited"])
        .args(["--max-in-flight-per-host", &HOST_CAP.to_string()])
        .args(["--allow-subnets", "127.0.0.1/32"])
        .env_remove("DATABASE_URL")
        .env("DAKGHAR_DATABASE_URL", url)
        .env("DAKGHAR_SECRETS_KEY", helpers::TEST_SECRETS_KEY)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a node")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn three_nodes_share_the_queue_and_a_killed_one_loses_nothing() {
    let db = TestDb::postgres().await;
    let store = db.store.clone();
    let clock = SystemClock;
    let now = clock.now();
    let account = store.create_account("cluster", now).await.unwrap();
    let other = store.create_account("other", now).await.unwrap();
    let endpoint = |account_id: &str, url: String, max_in_flight| NewEndpoint {
        account_id: account_id.to_string(),
        url,
        description: String::new(),
        event_types: vec![],
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
        rate_limit_per_sec: None,
        max_in_flight,
        retry_strategy: None,
        retry_statuses: None,
    };
    let mut receivers = Vec::new();
    for _ in 0..ENDPOINTS {
        let rx = Receiver::start().await;
        rx.delay(Duration::from_millis(2));
        store
            .create_endpoint(endpoint(&account.id, rx.url.clone(), MAX_IN_FLIGHT), now)
            .await
            .unwrap();
        receivers.push(rx);
    }
    // One receiver, two accounts' endpoints on it (paths differ, the host
    // is the same): together they may have 6 in flight, the host 4.
    let shared = Receiver::start().await;
    shared.delay(Duration::from_millis(2));
    for (acc, path) in [(&account.id, "/a"), (&other.id, "/b")] {
        store
            .create_endpoint(
                endpoint(acc, format!("{}{path}", shared.url), SHARED_MAX_IN_FLIGHT),
                now,
            )
            .await
            .unwrap();
    }
    for i in 0..OTHER_EVENTS {
        let event = NewEvent {
            account_id: other.id.clone(),
            id: format!("oth_{i:05}"),
            event_type: "t".into(),
            payload: b"{}".to_vec(),
        };
        store
            .insert_event(event, now, now.plus(Duration::from_secs(3600)))
            .await
            .unwrap();
    }

    let url = db.process_url();
    let mut nodes: Vec<Child> = (0..3).map(|_| node(&url)).collect();

    // Queue the events from 8 producers at once.
    let mut producers = Vec::new();
    for p in 0..8 {
        let store = store.clone();
        let account_id = account.id.clone();
        producers.push(tokio::spawn(async move {
            for i in (p..EVENTS).step_by(8) {
                let now = SystemClock.now();
                let event = NewEvent {
                    account_id: account_id.clone(),
                    id: format!("evt_{i:05}"),
                    event_type: "t".into(),
                    payload: format!(r#"{{"n":{i}}}"#).into_bytes(),
                };
                store
                    .insert_event(event, now, now.plus(Duration::from_secs(3600)))
                    .await
                    .unwrap();
                if i % 500 == 0 {
                    store.announce_work().await.unwrap();
                }
            }
        }));
    }
    for p in producers {
        p.await.unwrap();
    }
    store.announce_work().await.unwrap();

    let total = (EVENTS * (ENDPOINTS + 1) + OTHER_EVENTS) as i64;
    let received = |rxs: &[Receiver]| rxs.iter().map(Receiver::count).sum::<usize>();
    let deadline = Instant::now() + Duration::from_secs(600);
    while received(&receivers) < EVENTS * ENDPOINTS / 3 {
        assert!(Instant::now() < deadline, "the nodes are not delivering");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (n, node) in nodes.iter_mut().enumerate() {
        assert!(
            node.try_wait().unwrap().is_none(),
            "node {n} is running (several nodes may start on an empty database at once)"
        );
    }
    nodes[1].kill().expect("SIGKILL a node mid-run");
    nodes[1].wait().unwrap();

    loop {
        let delivered = store
            .count_deliveries(DeliveryState::Delivered)
            .await
            .unwrap();
        if delivered == total {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{delivered} of {total} delivered"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for n in [0, 2] {
        nodes[n].kill().unwrap();
        nodes[n].wait().unwrap();
    }
    assert!(
        shared.most_concurrent() as i64 <= HOST_CAP,
        "the per-host cap holds across nodes, endpoints and accounts: saw {}",
        shared.most_concurrent()
    );
    assert!(
        shared.most_concurrent() > 1,
        "the shared host was used concurrently at all: saw {}",
        shared.most_concurrent()
    );
    assert_eq!(
        shared.count(),
        EVENTS + OTHER_EVENTS + duplicates_on(&shared),
        "both accounts' events reached the shared receiver"
    );

    let mut duplicates = 0;
    for rx in &receivers {
        assert!(
            rx.most_concurrent() as i64 <= MAX_IN_FLIGHT,
            "max_in_flight holds across nodes: saw {}",
            rx.most_concurrent()
        );
        let mut seen: HashMap<String, usize> = HashMap::new();
        for got in rx.got() {
            *seen
                .entry(got.headers["webhook-id"].to_str().unwrap().to_string())
                .or_default() += 1;
        }
        assert_eq!(seen.len(), EVENTS, "every event reached every endpoint");
        duplicates += seen.values().map(|n| n - 1).sum::<usize>();
    }
    duplicates += duplicates_on(&shared);
    // Only what the killed node had sent but not recorded may arrive twice:
    // at most its share of the in-flight slots.
    assert!(
        duplicates <= ENDPOINTS * MAX_IN_FLIGHT as usize + HOST_CAP as usize,
        "{duplicates} duplicates: more than the killed node could have had in flight"
    );
    db.finish().await;
}

/// Requests beyond the first for each event id.
fn duplicates_on(rx: &Receiver) -> usize {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for got in rx.got() {
        *seen
            .entry(got.headers["webhook-id"].to_str().unwrap().to_string())
            .or_default() += 1;
    }
    seen.values().map(|n| n - 1).sum()
}
