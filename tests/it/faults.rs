//! Faults around a running Dakghar, on both backends, where the promise is
//! that nothing accepted is lost: the server killed with SIGKILL mid-run,
//! the database gone for ten seconds, and a random fault schedule from the
//! receiver over 10 k events.

use std::{
    collections::{hash_map::DefaultHasher, HashMap, HashSet},
    hash::{Hash, Hasher},
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{body::Body, extract::State, http::HeaderMap, response::Response, Router};
use dakghar::{
    clock::Clock,
    config::ServeConfig,
    store::{DeliveryState, NewEvent},
};
use serde_json::json;

use crate::{
    helpers::{new_endpoint, queue_events, spawn_app_with, Raw, TestDb, TEST_SECRETS_KEY},
    receiver::Receiver,
    served::{free_port, tenant, Served, BIN},
    tcp_proxy::TcpProxy,
};

on_both_backends_db!(
    a_server_killed_mid_run_delivers_every_accepted_event_after_restart,
    ten_seconds_without_the_database_lose_nothing,
);
on_both_backends_db!(a_random_fault_schedule_over_10k_events_leaves_none_missing);

fn start_server(url: &str, port: u16) -> Served {
    let child = Command::new(BIN)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--allow-subnets", "127.0.0.1/32", "--retention", "off"])
        .args(["--lease", "3s", "--request-timeout", "2s"])
        .args(["--retry-base-delay", "1s", "--retry-max-delay", "2s"])
        // Durability, not pacing: one receiver takes everything at once.
        .args(["--default-rate-limit", "unlimited"])
        .args(["--ingest-rate-limit", "unlimited"])
        .args(["--max-in-flight-per-host", "unlimited"])
        .env_remove("DATABASE_URL")
        .env("DAKGHAR_DATABASE_URL", url)
        .env("DAKGHAR_SECRETS_KEY", TEST_SECRETS_KEY)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start dakghar serve");
    Served(child)
}

/// Posts each event until the server has it (202; the same id again is
/// idempotent), as a careful producer does; returns the accepted ids.
async fn produce(base: String, key: String, numbers: Vec<usize>) -> Vec<String> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut accepted = Vec::new();
    for n in numbers {
        let id = format!("evt_{n:05}");
        let body = json!({ "id": id, "type": "t", "payload": { "n": n } });
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let res = http
                .post(format!("{base}/api/v1/events"))
                .bearer_auth(&key)
                .json(&body)
                .send()
                .await;
            if matches!(&res, Ok(r) if r.status() == reqwest::StatusCode::ACCEPTED) {
                accepted.push(id);
                break;
            }
            assert!(Instant::now() < deadline, "{id} never accepted: {res:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    accepted
}

/// What the receiver saw: each webhook-id with every body it came with.
fn bodies_by_id(rx: &Receiver) -> HashMap<String, Vec<axum::body::Bytes>> {
    let mut seen: HashMap<String, Vec<axum::body::Bytes>> = HashMap::new();
    for got in rx.got() {
        let id = got.headers["webhook-id"].to_str().unwrap().to_string();
        seen.entry(id).or_default().push(got.body);
    }
    seen
}

async fn a_server_killed_mid_run_delivers_every_accepted_event_after_restart(db: &TestDb) {
    const EVENTS: usize = 5_000;
    let rx = Receiver::start().await;
    rx.delay(Duration::from_millis(5));
    let key = tenant(&db.store, &rx.url, 64).await;
    let url = db.process_url();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut server = start_server(&url, port);

    let producers: Vec<_> = (0..8)
        .map(|p| {
            let numbers = (p..EVENTS).step_by(8).collect();
            tokio::spawn(produce(base.clone(), key.clone(), numbers))
        })
        .collect();

    // Kill it with thousands of events queued and in flight.
    let deadline = Instant::now() + Duration::from_secs(120);
    while rx.count() < 500 {
        assert!(
            Instant::now() < deadline,
            "nothing delivered before the kill"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.kill().expect("SIGKILL");
    let at_kill = rx.count();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut server = start_server(&url, port);

    let mut accepted = HashSet::new();
    for p in producers {
        accepted.extend(p.await.unwrap());
    }
    assert_eq!(accepted.len(), EVENTS, "the producers got every event in");
    assert!(at_kill < EVENTS, "the kill came mid-run");

    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let seen = bodies_by_id(&rx);
        let missing = accepted.iter().filter(|id| !seen.contains_key(*id)).count();
        if missing == 0 {
            // Redeliveries carry the same webhook-id and the same bytes.
            for (id, bodies) in &seen {
                assert!(accepted.contains(id), "{id} was never accepted");
                assert!(bodies.windows(2).all(|w| w[0] == w[1]), "{id} changed");
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{missing} accepted events never reached the receiver"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    server.kill().unwrap();
}

async fn ten_seconds_without_the_database_lose_nothing(db: &TestDb) {
    // Postgres: the app reaches the database through a proxy the test cuts.
    // SQLite: another process's connection holds the file's write lock.
    let proxy = match db.postgres_addr().await {
        Some(upstream) => Some(TcpProxy::start(upstream).await),
        None => None,
    };
    let store = match &proxy {
        Some(proxy) => db.postgres_store_at(proxy.addr).await.unwrap(),
        None => db.another_node().await,
    };
    let config = ServeConfig {
        run_workers: true,
        ..ServeConfig::for_tests()
    };
    let app = spawn_app_with(store, config).await;
    let rx = Receiver::start().await;
    let key = tenant(&db.store, &rx.url, 16).await;

    let mut accepted = produce(app.base.clone(), key.clone(), (0..20).collect()).await;
    rx.wait_for(20).await;

    let outage = Instant::now();
    let mut locker = match &proxy {
        Some(proxy) => {
            proxy.cut();
            None
        }
        None => Some(db.another_process_locking("BEGIN EXCLUSIVE").await),
    };
    let http = reqwest::Client::new();
    let res = http
        .post(app.url("/api/v1/events"))
        .bearer_auth(&key)
        .json(&json!({ "id": "evt_during", "type": "t", "payload": {} }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.headers().contains_key("retry-after"));
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nothing was stored"),
        "{body}"
    );
    assert!(
        outage.elapsed() < Duration::from_secs(10),
        "a prompt answer"
    );

    tokio::time::sleep(Duration::from_secs(10).saturating_sub(outage.elapsed())).await;
    match (&proxy, locker.take()) {
        (Some(proxy), _) => proxy.restore(),
        (None, Some(mut conn)) => {
            sqlx::query("ROLLBACK").execute(&mut conn).await.unwrap();
        }
        (None, None) => unreachable!(),
    }

    // The producer retries what was refused, and goes on.
    accepted.extend(produce(app.base.clone(), key, (20..60).collect()).await);
    // Attempts whose result could not be written wait for their lease.
    app.clock.advance(Duration::from_secs(6 * 60));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = bodies_by_id(&rx);
        let missing: Vec<_> = accepted
            .iter()
            .filter(|id| !seen.contains_key(*id))
            .collect();
        let delivered = db
            .store
            .count_deliveries(DeliveryState::Delivered)
            .await
            .unwrap();
        if missing.is_empty() && delivered == 60 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{delivered} of 60 delivered; missing at the receiver: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        !bodies_by_id(&rx).contains_key("evt_during"),
        "a 503 stored nothing"
    );
}

/// A receiver that answers each attempt by a fixed draw from its
/// webhook-id and attempt number, so a failing run replays exactly.
#[derive(Default)]
struct Chaos {
    attempts: Mutex<HashMap<String, u64>>,
    accepted: Mutex<HashSet<String>>,
}

async fn chaos(State(chaos): State<Arc<Chaos>>, headers: HeaderMap) -> Response {
    let id = headers["webhook-id"].to_str().unwrap().to_string();
    let attempt = {
        let mut attempts = chaos.attempts.lock().unwrap();
        let n = attempts.entry(id.clone()).or_default();
        *n += 1;
        *n
    };
    let mut hasher = DefaultHasher::new();
    (&id, attempt).hash(&mut hasher);
    let draw = hasher.finish() % 100;
    let answer = |status: u16| Response::builder().status(status);
    match draw {
        0..=54 => {
            chaos.accepted.lock().unwrap().insert(id);
            answer(200).body(Body::empty()).unwrap()
        }
        55..=66 => answer(500).body(Body::empty()).unwrap(),
        67..=74 => answer(503)
            .header("retry-after", "1")
            .body(Body::empty())
            .unwrap(),
        75..=80 => answer(429).body(Body::empty()).unwrap(),
        81..=85 => answer(404).body(Body::empty()).unwrap(),
        86..=89 => answer(400).body(Body::from("no such customer")).unwrap(),
        90..=94 => {
            // Slower than the request timeout.
            tokio::time::sleep(Duration::from_secs(3)).await;
            answer(200).body(Body::empty()).unwrap()
        }
        _ => {
            // The status arrives, then the connection breaks mid-body.
            use tokio::io::AsyncReadExt;
            let broken = tokio_util::io::ReaderStream::new((&b"partial"[..]).chain(Broken));
            answer(200).body(Body::from_stream(broken)).unwrap()
        }
    }
}

/// A body that fails where it should go on.
struct Broken;

impl tokio::io::AsyncRead for Broken {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Err(std::io::Error::other("connection reset")))
    }
}

async fn a_random_fault_schedule_over_10k_events_leaves_none_missing(db: &TestDb) {
    let store = db.store.clone();
    const EVENTS: usize = 10_000;
    let state = Arc::new(Chaos::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let router = Router::new().fallback(chaos).with_state(Arc::clone(&state));
    tokio::spawn(async move { axum::serve(listener, router).await });

    let mut config = ServeConfig::for_tests();
    // Each tick waits for its slowest attempt: the timeouts set the pace.
    config.delivery.request_timeout = Duration::from_millis(200);
    config.delivery.max_attempts = 4;
    config.delivery.batch_size = 500;
    config.delivery.backoff.base = Duration::from_secs(1);
    config.delivery.backoff.cap = Duration::from_secs(4);
    // The breaker opens on this receiver (about half its answers fail, more
    // when a loaded machine runs into the timeout), and each failed trial
    // doubles its cooldown. Capped at a minute so the run ends in a bounded
    // number of steps; the engine tests cover the cooldown's growth.
    config.delivery.circuit_max_cooldown = Duration::from_secs(60);
    let app = spawn_app_with(store.clone(), config).await;
    // A receiver this hostile is paced down hard (each 429/503 holds its
    // endpoint, overload halves the in-flight cap), which is right but
    // slow: spread over two hundred endpoints, each paced on its own, the
    // run still ends in a bounded number of steps.
    const ENDPOINTS: usize = 200;
    let now = app.clock.now();
    let account = store.create_account("acme", now).await.unwrap();
    for e in 0..ENDPOINTS {
        let mut endpoint = new_endpoint(&account.id, &format!("{url}/{e}"), &[&format!("t{e}")]);
        endpoint.max_in_flight = 20;
        store.create_endpoint(endpoint, now).await.unwrap();
    }
    let now = app.clock.now();
    let events = (0..EVENTS).map(|n| NewEvent {
        account_id: account.id.clone(),
        id: format!("evt_{n:05}"),
        event_type: format!("t{}", n % ENDPOINTS),
        payload: format!(r#"{{"n":{n}}}"#).into_bytes(),
    });
    let give_up_at = now.plus(Duration::from_secs(72 * 3600));
    queue_events(&store, events, now, give_up_at).await;

    // Time moves in steps of the breaker's base cooldown.
    for round in 0.. {
        while app.engine.tick().await.unwrap() > 0 {}
        let open = store
            .count_deliveries(DeliveryState::Pending)
            .await
            .unwrap()
            + store
                .count_deliveries(DeliveryState::InFlight)
                .await
                .unwrap();
        if open == 0 {
            break;
        }
        assert!(
            round < 500,
            "{open} deliveries still open after {round} rounds"
        );
        app.clock.advance(Duration::from_secs(30));
    }

    let delivered = store
        .count_deliveries(DeliveryState::Delivered)
        .await
        .unwrap();
    let failed = store.count_deliveries(DeliveryState::Failed).await.unwrap();
    let expired = store
        .count_deliveries(DeliveryState::Expired)
        .await
        .unwrap();
    assert_eq!(
        (delivered + failed + expired) as usize,
        EVENTS,
        "{delivered} delivered, {failed} failed, {expired} expired: none missing"
    );
    assert!(
        delivered > 0 && failed > 0 && expired > 0,
        "the schedule hit every path"
    );
    // Delivered means the receiver gave a whole 2xx answer. (A 2xx that
    // arrived after the timeout was retried instead: at least once.)
    let sql = "SELECT event_id FROM deliveries WHERE state = 'delivered'";
    let ids: Vec<String> = match &db.raw().await {
        Raw::Sqlite(p) => sqlx::query_scalar(sql).fetch_all(p).await.unwrap(),
        Raw::Postgres(p) => sqlx::query_scalar(sql).fetch_all(p).await.unwrap(),
    };
    let accepted = state.accepted.lock().unwrap().clone();
    let unearned: Vec<_> = ids.iter().filter(|id| !accepted.contains(*id)).collect();
    assert!(
        unearned.is_empty(),
        "delivered without a whole 2xx: {unearned:?}"
    );
    // Each one that did not arrive says why, attempt by attempt.
    let filter = dakghar::store::EventFilter {
        state: Some("expired".into()),
        ..Default::default()
    };
    let page = store.list_events(&account.id, &filter, 5).await.unwrap();
    assert!(!page.events.is_empty());
    for (event, deliveries) in page.events {
        let attempts = store.attempts_of_delivery(&deliveries[0].id).await.unwrap();
        assert_eq!(attempts.len(), 4, "{}", event.id);
        assert!(attempts.iter().all(|a| a.classification != "delivered"));
        assert!(deliveries[0].last_error.is_some() || deliveries[0].last_status.is_some());
    }
}
