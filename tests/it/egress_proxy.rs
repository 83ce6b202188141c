//! Proxies and the SSRF guard: a proxy resolves the target's name itself,
//! past the guarded resolver, so the proxy variables of the environment
//! are never used; an explicit `--egress-proxy` is, and internal targets
//! are still refused before anything is sent.

use std::{
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use dakghar::{
    clock::{Clock, SystemClock, Timestamp},
    config::ServeConfig,
    delivery::target_policy::TargetPolicy,
    store::{DeliveryState, NewEvent, Store},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

use crate::{
    dashboard_events::tick_until_idle,
    helpers::{new_endpoint, spawn_app_with, TestDb, TEST_SECRETS_KEY},
    receiver::Receiver,
    served::{free_port, Served, BIN},
};

on_both_backends_db!(environment_proxies_are_never_used);
on_both_backends!(an_egress_proxy_carries_requests_but_internal_targets_are_refused_first);

/// A proxy that records the request line of every connection and answers
/// 200 itself, forwarding nothing.
struct RecordingProxy {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicUsize>,
}

impl RecordingProxy {
    async fn start() -> RecordingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (s, c) = (Arc::clone(&seen), Arc::clone(&connections));
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let seen = Arc::clone(&s);
                tokio::spawn(async move {
                    let mut head = vec![0u8; 8192];
                    let n = conn.read(&mut head).await.unwrap_or(0);
                    let text = String::from_utf8_lossy(&head[..n]).into_owned();
                    seen.lock()
                        .unwrap()
                        .push(text.lines().next().unwrap_or_default().to_string());
                    let _ = conn
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                });
            }
        });
        RecordingProxy {
            url,
            seen,
            connections,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// An event for a new endpoint at `url`, saved past the API's checks, as
/// if the name had pointed elsewhere when the endpoint was saved.
async fn one_delivery_to(store: &Store, now: Timestamp, url: &str, ty: &str) -> String {
    let account = store.create_account(ty, now).await.unwrap();
    store
        .create_endpoint(new_endpoint(&account.id, url, &[ty]), now)
        .await
        .unwrap();
    let inserted = store
        .insert_event(
            NewEvent {
                account_id: account.id.clone(),
                id: format!("evt_{ty}"),
                event_type: ty.to_string(),
                payload: b"{}".to_vec(),
            },
            now,
            now.plus(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    inserted.deliveries[0].id.clone()
}

/// The delivery's attempts once it has finished.
async fn finished(store: &Store, delivery_id: &str) -> Vec<dakghar::store::Attempt> {
    for _ in 0..300 {
        let d = store.delivery(delivery_id).await.unwrap();
        if d.finished_at.is_some() {
            return store.attempts_of_delivery(delivery_id).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{delivery_id} never finished");
}

/// The real binary with every proxy variable pointing at a recording
/// proxy: a name that resolves to loopback is blocked by the guard and the
/// proxy never hears of it (before, reqwest sent it to the proxy, which
/// resolved the name itself).
async fn environment_proxies_are_never_used(db: &TestDb) {
    let proxy = RecordingProxy::start().await;
    let rx = Receiver::start().await;
    let port = url::Url::parse(&rx.url).unwrap().port().unwrap();
    let delivery = one_delivery_to(
        &db.store,
        SystemClock.now(),
        &format!("http://localhost:{port}/hook"),
        "t",
    )
    .await;
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--retention", "off"])
        .env_remove("DATABASE_URL")
        .env("DAKGHAR_DATABASE_URL", db.process_url())
        .env("DAKGHAR_SECRETS_KEY", TEST_SECRETS_KEY)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for var in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        command.env(var, &proxy.url);
    }
    command.env_remove("NO_PROXY").env_remove("no_proxy");
    let _server = Served(command.spawn().expect("start dakghar serve"));

    let attempts = finished(&db.store, &delivery).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].classification, "blocked", "{attempts:?}");
    let error = attempts[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("loopback"), "{error}");
    let state = db.store.delivery(&delivery).await.unwrap().state;
    assert_eq!(state, DeliveryState::Failed.as_str());
    assert_eq!(proxy.connections(), 0, "{:?}", proxy.seen.lock().unwrap());
    assert_eq!(rx.count(), 0);
}

/// With `--egress-proxy` the request goes to the proxy (which here answers
/// itself, as a proxy on a private address may: that is the proxy's
/// business), while a name that resolves to loopback and a literal
/// internal address are refused before the proxy sees anything.
async fn an_egress_proxy_carries_requests_but_internal_targets_are_refused_first(store: Store) {
    let proxy = RecordingProxy::start().await;
    let mut config = ServeConfig::for_tests();
    config.delivery.targets = TargetPolicy::default();
    config.delivery.egress_proxy = Some(url::Url::parse(&proxy.url).unwrap());
    let app = spawn_app_with(store, config).await;

    let by_name =
        one_delivery_to(&app.store, app.clock.now(), "http://localhost:9/hook", "n").await;
    let literal = one_delivery_to(&app.store, app.clock.now(), "http://10.1.2.3/hook", "l").await;
    tick_until_idle(&app).await;
    for d in [&by_name, &literal] {
        let attempts = app.store.attempts_of_delivery(d).await.unwrap();
        assert_eq!(attempts.len(), 1, "{d}");
        assert_eq!(attempts[0].classification, "blocked", "{attempts:?}");
    }
    assert_eq!(proxy.connections(), 0, "{:?}", proxy.seen.lock().unwrap());

    // A public address passes the guard and travels through the proxy.
    let public = one_delivery_to(
        &app.store,
        app.clock.now(),
        "http://93.184.216.34/hook",
        "p",
    )
    .await;
    tick_until_idle(&app).await;
    let d = app.store.delivery(&public).await.unwrap();
    assert_eq!(d.state, DeliveryState::Delivered.as_str());
    let seen = proxy.seen.lock().unwrap().clone();
    assert_eq!(seen, ["POST http://93.184.216.34/hook HTTP/1.1"]);
}
