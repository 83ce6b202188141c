//! The engine's limits and safety nets with real workers running: in-flight
//! and rate limits, the circuit breaker, dead endpoints, shutdown, leases,
//! several nodes on one database, wake-ups, and what reaches the receiver.

use std::{sync::Arc, time::Duration};

use dakghar::{
    clock::{Clock, TestClock},
    config::ServeConfig,
    delivery::settings::DeliverySettings,
    store::{DeliveryState, NewEvent, Store},
};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::{
    api_client::Api,
    helpers::{new_endpoint, spawn_node, wait_for_activity, Raw, StateOf, TestApp, TestDb},
    receiver::Receiver,
};

on_both_backends!(
    concurrent_attempts_never_exceed_max_in_flight,
    the_rate_limit_holds_work_back_without_counting_an_attempt,
    the_circuit_opens_and_no_attempts_are_burned_while_open,
    a_streak_of_permanent_failures_pauses_the_endpoint,
    a_day_without_success_while_dead_lettering_pauses_the_endpoint,
    shutdown_lets_attempts_finish_within_the_grace_period,
    shutdown_hands_back_attempts_that_outlast_the_grace_period,
    a_receiver_that_hangs_times_out_and_is_retried,
    redirects_are_recorded_not_followed,
    large_and_binary_response_bodies_are_capped_and_stored_safely,
    both_secrets_sign_during_rotation,
    an_expired_lease_is_rescued_and_delivered_once,
    a_new_event_wakes_idle_workers_at_once,
    an_ingest_leases_its_deliveries_for_this_nodes_workers,
    work_held_back_by_a_full_endpoint_goes_as_its_slots_free,
    a_slot_freed_by_any_round_lets_held_work_through,
    a_hanging_receiver_does_not_hold_up_the_worker,
    a_node_holds_at_most_workers_times_batch_in_flight,
    resends_are_limited_per_endpoint_with_retry_after,
);

on_both_backends_db!(two_nodes_never_deliver_the_same_claim_twice);

/// The test settings with workers running and `tweak` applied.
fn with_workers(tweak: impl FnOnce(&mut DeliverySettings)) -> ServeConfig {
    let mut config = ServeConfig::for_tests();
    config.run_workers = true;
    tweak(&mut config.delivery);
    config
}

/// Waits (real time) until `n` deliveries are delivered.
async fn wait_delivered(store: &Store, n: i64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let done = store
            .count_deliveries(DeliveryState::Delivered)
            .await
            .unwrap();
        if done >= n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{done} of {n} delivered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn send_many(api: &Api, n: usize) -> Vec<Value> {
    let mut sent = Vec::with_capacity(n);
    for i in 0..n {
        sent.push(
            api.send(json!({ "type": "t", "payload": { "n": i } }))
                .await,
        );
    }
    sent
}

async fn tick_until_idle(api: &Api) {
    while api.tick().await > 0 {}
}

async fn concurrent_attempts_never_exceed_max_in_flight(store: Store) {
    let api = Api::with_config(store, with_workers(|d| d.workers = 4)).await;
    let rx = Receiver::start().await;
    rx.delay(Duration::from_millis(150));
    api.endpoint_with(&rx, json!({ "max_in_flight": 3 })).await;

    send_many(&api, 12).await;
    wait_delivered(&api.app.store, 12).await;

    assert_eq!(rx.count(), 12);
    let most = rx.most_concurrent();
    assert!(most <= 3, "at most max_in_flight at once, saw {most}");
    assert!(most >= 2, "four workers do overlap requests, saw {most}");
}

async fn the_rate_limit_holds_work_back_without_counting_an_attempt(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint_with(&rx, json!({ "rate_limit_per_sec": 2 }))
        .await;
    let events = send_many(&api, 5).await;

    assert_eq!(
        api.tick().await,
        2,
        "the claim spends two starts of this second"
    );
    assert_eq!(rx.count(), 2);
    let mut waiting = 0;
    for ev in &events {
        let d = api.delivery(ev).await;
        if d.state() == Some(DeliveryState::Pending) {
            waiting += 1;
            assert_eq!((d.attempts, d.attempt_seq), (0, 0), "no attempt counted");
            assert!(
                d.next_attempt_at <= api.app.clock.now().millis(),
                "still due, only held back"
            );
        }
    }
    assert_eq!(waiting, 3);
    assert_eq!(api.tick().await, 0, "nothing more in this second");

    api.advance(Duration::from_secs(1));
    assert_eq!(api.tick().await, 2);
    assert_eq!(rx.count(), 4);
    api.advance(Duration::from_secs(1));
    api.tick().await;
    assert_eq!(rx.count(), 5);
    for ev in &events {
        let d = api.delivery(ev).await;
        assert_eq!(d.state(), Some(DeliveryState::Delivered));
        assert_eq!(d.attempt_seq, 1, "one attempt each");
    }
}

async fn the_circuit_opens_and_no_attempts_are_burned_while_open(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    let ep_id = ep["id"].as_str().unwrap();
    rx.script(&[500; 5]);
    let mut events = send_many(&api, 5).await;
    assert_eq!(api.tick().await, 5);
    assert_eq!(rx.count(), 5);

    let endpoint = api.app.store.endpoint_by_id(ep_id).await.unwrap();
    assert_eq!(
        endpoint.circuit_state, "open",
        "five transient failures in a row"
    );
    let opened_at = api.app.clock.now().millis();
    assert_eq!(endpoint.circuit_open_until, Some(opened_at + 30_000));

    // Due now, but the circuit is open: not claimed, not attempted, not counted.
    let blocked = api.send(json!({ "type": "t", "payload": {} })).await;
    assert_eq!(api.tick().await, 0);
    assert_eq!(rx.count(), 5);
    assert_eq!(api.delivery(&blocked).await.attempts, 0);

    // Cooldown over: exactly one trial, the oldest due delivery. It fails,
    // so the circuit opens again for twice as long.
    api.advance(Duration::from_secs(30));
    rx.script(&[500]);
    assert_eq!(api.tick().await, 1, "a single half-open trial");
    assert_eq!(rx.count(), 6);
    assert_eq!(
        api.delivery(&blocked).await.attempts,
        1,
        "the trial was the blocked one"
    );
    let endpoint = api.app.store.endpoint_by_id(ep_id).await.unwrap();
    assert_eq!(endpoint.circuit_state, "open");
    assert_eq!(endpoint.circuit_cooldown_ms, 60_000, "cooldown grows");

    api.advance(Duration::from_secs(59));
    assert_eq!(
        api.tick().await,
        0,
        "still open: everything is due, nothing goes"
    );
    assert_eq!(rx.count(), 6);

    api.advance(Duration::from_secs(1));
    assert_eq!(api.tick().await, 1, "the next trial");
    let endpoint = api.app.store.endpoint_by_id(ep_id).await.unwrap();
    assert_eq!(endpoint.circuit_state, "closed", "a success closes it");

    api.advance(Duration::from_secs(300));
    tick_until_idle(&api).await;
    events.push(blocked);
    let mut attempts_recorded = 0;
    for ev in &events {
        let d = api.delivery(ev).await;
        assert_eq!(d.state(), Some(DeliveryState::Delivered));
        attempts_recorded += d.attempt_seq;
    }
    assert_eq!(
        attempts_recorded as usize,
        rx.count(),
        "every recorded attempt reached the receiver, and only those"
    );
}

async fn a_streak_of_permanent_failures_pauses_the_endpoint(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint_with(&rx, json!({ "max_in_flight": 50 })).await;
    let ep_id = ep["id"].as_str().unwrap();
    rx.script(&[400; 100]);
    send_many(&api, 99).await;
    tick_until_idle(&api).await;
    let endpoint = api.app.store.endpoint_by_id(ep_id).await.unwrap();
    assert_eq!(
        (endpoint.state.as_str(), endpoint.failure_streak),
        ("active", 99),
        "99 is not yet a dead endpoint"
    );

    send_many(&api, 1).await;
    tick_until_idle(&api).await;
    let endpoint = api.app.store.endpoint_by_id(ep_id).await.unwrap();
    assert_eq!(endpoint.state, "paused");
    assert_eq!(
        endpoint.pause_reason.as_deref(),
        Some("100 permanent failures in a row")
    );
    let notes = api
        .app
        .store
        .notifications(&endpoint.account_id)
        .await
        .unwrap();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].kind, "endpoint_paused");
    assert!(
        notes[0].body.contains("100 permanent failures"),
        "{}",
        notes[0].body
    );

    // Paused: new events queue, and resume drains them.
    let queued = send_many(&api, 2).await;
    assert_eq!(api.tick().await, 0);
    let (s, _) = api
        .call(
            Method::POST,
            &format!("/api/v1/endpoints/{ep_id}/resume"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    tick_until_idle(&api).await;
    for ev in &queued {
        assert_eq!(
            api.delivery(ev).await.state(),
            Some(DeliveryState::Delivered)
        );
    }
}

async fn a_day_without_success_while_dead_lettering_pauses_the_endpoint(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    let ep_id = ep["id"].as_str().unwrap();
    rx.script(&[400, 500, 400]);

    let first = send_many(&api, 1).await;
    api.tick().await;
    assert_eq!(
        api.delivery(&first[0]).await.state(),
        Some(DeliveryState::Failed)
    );
    let endpoint = api.app.store.endpoint_by_id(ep_id).await.unwrap();
    assert_eq!(
        endpoint.state, "active",
        "one dead letter on a fresh failure is not a dead endpoint"
    );

    let second = send_many(&api, 1).await;
    api.tick().await;
    assert_eq!(
        api.delivery(&second[0]).await.state(),
        Some(DeliveryState::Pending)
    );

    api.advance(Duration::from_secs(25 * 3600));
    assert_eq!(api.tick().await, 1);
    assert_eq!(
        api.delivery(&second[0]).await.state(),
        Some(DeliveryState::Failed)
    );
    let endpoint = api.app.store.endpoint_by_id(ep_id).await.unwrap();
    assert_eq!(endpoint.state, "paused");
    assert!(
        endpoint
            .pause_reason
            .as_deref()
            .unwrap()
            .contains("24 hours"),
        "{:?}",
        endpoint.pause_reason
    );
    let notes = api
        .app
        .store
        .notifications(&endpoint.account_id)
        .await
        .unwrap();
    assert_eq!(notes.len(), 1);
}

async fn shutdown_lets_attempts_finish_within_the_grace_period(store: Store) {
    let config = with_workers(|d| d.shutdown_grace = Duration::from_secs(20));
    let api = Api::with_config(store, config).await;
    let rx = Receiver::start().await;
    rx.delay(Duration::from_millis(700));
    api.endpoint(&rx).await;
    let ev = send_many(&api, 1).await;
    rx.wait_for(1).await;

    api.app.shutdown().await;
    let d = api.delivery(&ev[0]).await;
    assert_eq!(
        d.state(),
        Some(DeliveryState::Delivered),
        "finished during the grace period"
    );
    assert_eq!(d.attempt_seq, 1);
}

async fn shutdown_hands_back_attempts_that_outlast_the_grace_period(store: Store) {
    let config = with_workers(|d| d.shutdown_grace = Duration::from_millis(200));
    let api = Api::with_config(store, config).await;
    let rx = Receiver::start().await;
    rx.delay(Duration::from_secs(5));
    api.endpoint(&rx).await;
    let ev = send_many(&api, 1).await;
    rx.wait_for(1).await;
    let before = api.delivery(&ev[0]).await;
    assert_eq!(before.state(), Some(DeliveryState::InFlight));

    api.app.shutdown().await;
    let d = api.delivery(&ev[0]).await;
    assert_eq!(
        d.state(),
        Some(DeliveryState::Pending),
        "back in the queue at once"
    );
    assert_eq!(
        (d.attempts, d.attempt_seq),
        (0, 0),
        "not counted as an attempt"
    );
    assert_eq!((d.claim_token, d.lease_until), (None, None));
    let attempts = api.app.store.attempts_of_delivery(&d.id).await.unwrap();
    assert!(attempts.is_empty());
}

async fn a_receiver_that_hangs_times_out_and_is_retried(store: Store) {
    let mut config = ServeConfig::for_tests();
    config.delivery.request_timeout = Duration::from_millis(300);
    let api = Api::with_config(store, config).await;
    let rx = Receiver::start().await;
    rx.delay(Duration::from_secs(5));
    api.endpoint(&rx).await;
    let ev = send_many(&api, 1).await;

    api.tick().await;
    let d = api.delivery(&ev[0]).await;
    assert_eq!(
        d.state(),
        Some(DeliveryState::Pending),
        "a timeout is transient"
    );
    assert_eq!((d.attempts, d.last_status), (1, None));
    let attempts = api.app.store.attempts_of_delivery(&d.id).await.unwrap();
    let error = attempts[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("timed out"), "{error}");
    assert!(
        attempts[0].duration_ms < 5_000,
        "gave up before the receiver answered"
    );
}

async fn redirects_are_recorded_not_followed(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let elsewhere = Receiver::start().await;
    api.endpoint(&rx).await;
    for status in [302, 308] {
        rx.script_with_headers(status, vec![("location", elsewhere.url.clone())]);
        let ev = send_many(&api, 1).await;

        api.tick().await;
        assert_eq!(elsewhere.count(), 0, "the {status} was not followed");
        let d = api.delivery(&ev[0]).await;
        assert_eq!(d.state(), Some(DeliveryState::Pending), "3xx is retried");
        assert_eq!((d.attempts, d.last_status), (1, Some(i64::from(status))));
    }
}

async fn large_and_binary_response_bodies_are_capped_and_stored_safely(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    // Not UTF-8 anywhere: 0xFF never is, and a NUL byte for good measure.
    let body: Vec<u8> = (0..1_000_000u32)
        .map(|i| if i % 7 == 0 { 0 } else { 0xFF - (i % 3) as u8 })
        .collect();
    rx.answer_body(body.clone());
    let ev = send_many(&api, 1).await;

    api.tick().await;
    let d = api.delivery(&ev[0]).await;
    assert_eq!(d.state(), Some(DeliveryState::Delivered));
    let attempts = api.app.store.attempts_of_delivery(&d.id).await.unwrap();
    assert_eq!(attempts[0].response_body.as_deref(), Some(&body[..512]));
    assert_eq!(d.last_response.as_deref(), Some(&body[..512]));

    let detail = api.detail(ev[0]["id"].as_str().unwrap()).await;
    let snippet = detail["deliveries"][0]["attempts"][0]["response_snippet"]
        .as_str()
        .expect("a displayable snippet");
    assert!(!snippet.is_empty());
}

async fn both_secrets_sign_during_rotation(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    let old = ep["secret"].as_str().unwrap().to_string();
    let (s, rotated) = api
        .call(
            Method::POST,
            &format!(
                "/api/v1/endpoints/{}/rotate-secret",
                ep["id"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{rotated}");
    let new = rotated["secret"].as_str().unwrap().to_string();
    assert_ne!(old, new);

    send_many(&api, 1).await;
    api.tick().await;
    let got = &rx.got()[0];
    let signatures = got.headers["webhook-signature"].to_str().unwrap();
    assert_eq!(signatures.split(' ').count(), 2, "{signatures}");
    for secret in [&old, &new] {
        let verified =
            standardwebhooks::Webhook::new(secret).and_then(|w| w.verify(&got.body, &got.headers));
        assert!(
            verified.is_ok(),
            "a receiver still on either secret accepts it"
        );
    }

    api.advance(Duration::from_secs(24 * 3600 + 1));
    send_many(&api, 1).await;
    api.tick().await;
    let later = &rx.got()[1];
    let signatures = later.headers["webhook-signature"].to_str().unwrap();
    assert_eq!(
        signatures.split(' ').count(),
        1,
        "the old secret retired after 24 h"
    );
}

async fn an_expired_lease_is_rescued_and_delivered_once(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    let ev = send_many(&api, 1).await;

    // A node claims it and dies before sending.
    let now = api.app.clock.now();
    let lost = api
        .app
        .store
        .claim_due(
            now,
            now.plus(Duration::from_secs(300)),
            10,
            dakghar::store::ClaimRules::default(),
        )
        .await
        .unwrap();
    assert_eq!(lost.len(), 1);
    assert_eq!(api.tick().await, 0, "leased to the dead node for now");

    api.advance(Duration::from_secs(301));
    assert_eq!(api.tick().await, 1, "rescued and claimed again");
    let d = api.delivery(&ev[0]).await;
    assert_eq!(d.state(), Some(DeliveryState::Delivered));
    assert_eq!(d.attempt_seq, 1, "the rescue itself is not an attempt");
    assert_eq!(rx.count(), 1);
}

async fn a_new_event_wakes_idle_workers_at_once(store: Store) {
    // With an hour between polls, only the wake-up can explain a delivery.
    let config = with_workers(|d| d.poll_interval = Duration::from_secs(3600));
    let api = Api::with_config(store, config).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    send_many(&api, 1).await;
    rx.wait_for(1).await;
    wait_delivered(&api.app.store, 1).await;
    // The workers have now gone idle.
    send_many(&api, 1).await;
    rx.wait_for(2).await;
}

/// The ingest's own transaction leases a new event's deliveries for
/// this node's workers, instead of a claim of their own after it: they
/// are in flight when the producer is answered, and each is delivered
/// once. A node whose workers do not run leases nothing.
async fn an_ingest_leases_its_deliveries_for_this_nodes_workers(store: Store) {
    let rx = Receiver::start().await;
    rx.delay(Duration::from_millis(300));
    let ingest = |app: &TestApp, account: String, id: &'static str| {
        let ctx = Arc::clone(&app.ctx);
        async move {
            let new = NewEvent {
                account_id: account,
                id: id.into(),
                event_type: "t".into(),
                payload: b"{}".to_vec(),
            };
            let ingested = dakghar::events::ingest(&ctx, new, None, None, None)
                .await
                .unwrap();
            ingested
                .deliveries
                .iter()
                .map(|d| d.state)
                .collect::<Vec<DeliveryState>>()
        }
    };

    let idle = spawn_node(
        store.clone(),
        ServeConfig::for_tests(),
        TestClock::starting_now(),
    )
    .await;
    let now = idle.clock.now();
    let acc = store.create_account("acme", now).await.unwrap();
    for n in 0..2 {
        let url = format!("{}?n={n}", rx.url);
        store
            .create_endpoint(new_endpoint(&acc.id, &url, &[]), now)
            .await
            .unwrap();
    }
    assert_eq!(
        ingest(&idle, acc.id.clone(), "a").await,
        [DeliveryState::Pending; 2],
        "no workers here: the claim loops of some node take them"
    );
    // Read before the next node starts: its loops claim `a` at once.
    let before = leased(&idle).await;
    idle.shutdown().await;

    let config = with_workers(|d| d.poll_interval = Duration::from_secs(3600));
    let node = spawn_node(store.clone(), config, TestClock::starting_now()).await;
    // The loops' first claim takes `a` (a lease takes the oldest due
    // first, and `a`'s would be those).
    wait_delivered(&store, 2).await;
    for id in ["b", "c"] {
        assert_eq!(
            ingest(&node, acc.id.clone(), id).await,
            [DeliveryState::InFlight; 2]
        );
    }
    wait_delivered(&store, 6).await;
    assert_eq!(rx.count(), 6, "each once");
    // /metrics says which way each went. The recorder is the test
    // process's, and other tests lease meanwhile: at least these.
    let after = leased(&node).await;
    assert!(
        after[0] - before[0] >= 4.0,
        "by ingest: {before:?} -> {after:?}"
    );
    assert!(
        after[1] - before[1] >= 2.0,
        "by claims: {before:?} -> {after:?}"
    );
}

/// `dakghar_leased_total` by the ingest, then by claims, from the node's /metrics.
async fn leased(app: &TestApp) -> [f64; 2] {
    let text = crate::metrics::scrape_at(&app.url("/metrics")).await;
    ["ingest", "claim"]
        .map(|by| crate::metrics::value(&text, &format!("dakghar_leased_total{{by=\"{by}\"}}")))
}

async fn work_held_back_by_a_full_endpoint_goes_as_its_slots_free(store: Store) {
    // No polling, and the events are all in while the first two attempts
    // still hang: only a settled round that wakes its loop delivers the rest.
    let config = with_workers(|d| {
        d.workers = 1;
        d.poll_interval = Duration::from_secs(3600);
    });
    let api = Api::with_config(store, config).await;
    let rx = Receiver::start().await;
    rx.delay(Duration::from_secs(2));
    api.endpoint_with(&rx, json!({ "max_in_flight": 2 })).await;
    send_many(&api, 6).await;
    assert!(rx.count() <= 2, "the first two were still hanging");
    wait_delivered(&api.app.store, 6).await;
    assert_eq!(rx.count(), 6);
    assert!(rx.most_concurrent() <= 2);
}

async fn a_slot_freed_by_any_round_lets_held_work_through(store: Store) {
    // No polling; two at a time. The first attempt is claimed alone (its
    // claim held nothing back) and answers in 1.5 s; the second, whose
    // claim took the last slot, hangs for 8 s; a third event arrives
    // while both are open. Only the first round's settling can send it
    // before the second's.
    let config = with_workers(|d| {
        d.workers = 1;
        d.poll_interval = Duration::from_secs(3600);
    });
    let api = Api::with_config(store, config).await;
    let rx = Receiver::start().await;
    api.endpoint_with(&rx, json!({ "max_in_flight": 2 })).await;
    rx.delay(Duration::from_millis(1500));
    send_many(&api, 1).await;
    rx.wait_for(1).await;
    rx.delay(Duration::from_secs(8));
    send_many(&api, 1).await;
    rx.wait_for(2).await;
    send_many(&api, 1).await;
    tokio::time::timeout(Duration::from_secs(5), rx.wait_for(3))
        .await
        .expect("the third event waited for the slow attempt");
    assert!(rx.open() >= 1, "the slow attempt was still open");
    wait_delivered(&api.app.store, 3).await;
}

async fn a_hanging_receiver_does_not_hold_up_the_worker(store: Store) {
    // One claim loop and no polling: only a loop that is free again while
    // the slow attempt hangs can deliver the second event.
    let config = with_workers(|d| {
        d.workers = 1;
        d.poll_interval = Duration::from_secs(3600);
    });
    let api = Api::with_config(store, config).await;
    let (slow, fast) = (Receiver::start().await, Receiver::start().await);
    slow.delay(Duration::from_secs(5));
    api.endpoint_with(&slow, json!({ "event_types": ["slow"] }))
        .await;
    api.endpoint_with(&fast, json!({ "event_types": ["fast"] }))
        .await;
    api.send(json!({ "type": "slow", "payload": {} })).await;
    slow.wait_for(1).await;
    api.send(json!({ "type": "fast", "payload": {} })).await;
    tokio::time::timeout(Duration::from_secs(2), fast.wait_for(1))
        .await
        .expect("the fast endpoint waited for the hanging one");
    assert_eq!(slow.open(), 1, "the slow attempt was still hanging");
    wait_delivered(&api.app.store, 2).await;
}

async fn a_node_holds_at_most_workers_times_batch_in_flight(store: Store) {
    let config = with_workers(|d| {
        d.workers = 2;
        d.batch_size = 3;
    });
    let api = Api::with_config(store, config).await;
    let rx = Receiver::start().await;
    rx.delay(Duration::from_millis(200));
    api.endpoint_with(&rx, json!({ "max_in_flight": 100 }))
        .await;
    send_many(&api, 30).await;
    wait_delivered(&api.app.store, 30).await;
    let most = rx.most_concurrent();
    assert!(most <= 6, "2 loops × 3 at most, saw {most}");
    assert!(
        most >= 4,
        "the loops claim while others' rounds are open, saw {most}"
    );
}

async fn resends_are_limited_per_endpoint_with_retry_after(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint_with(&rx, json!({ "max_in_flight": 100 }))
        .await;
    let events = send_many(&api, 101).await;
    tick_until_idle(&api).await;

    let resend = |ev: &Value| {
        let id = ev["deliveries"][0]["id"].as_str().unwrap().to_string();
        let req = api
            .http
            .post(api.app.url(&format!("/api/v1/deliveries/{id}/resend")))
            .bearer_auth(&api.key);
        async move { req.send().await.unwrap() }
    };
    for ev in &events[..100] {
        assert_eq!(resend(ev).await.status(), StatusCode::ACCEPTED);
    }
    let refused = resend(&events[100]).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "Retry-After {wait}");
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("100 resends per minute"),
        "{body}"
    );
    let untouched = api.delivery(&events[100]).await;
    assert_eq!(
        untouched.state(),
        Some(DeliveryState::Delivered),
        "nothing changed"
    );

    api.advance(Duration::from_secs(wait));
    assert_eq!(resend(&events[100]).await.status(), StatusCode::ACCEPTED);
}

async fn two_nodes_never_deliver_the_same_claim_twice(db: &TestDb) {
    let config = || with_workers(|d| d.workers = 3);
    let api = Api::with_config(db.store.clone(), config()).await;
    let other = spawn_node(db.another_node().await, config(), api.app.clock.clone()).await;
    let rx = Receiver::start().await;
    rx.delay(Duration::from_millis(10));
    api.endpoint(&rx).await;

    send_many(&api, 60).await;
    wait_delivered(&api.app.store, 60).await;
    // A double delivery would be an attempt still under way on one node:
    // both nodes stop, finishing what they hold, before anything is counted.
    other.shutdown().await;
    api.app.shutdown().await;

    let mut ids: Vec<_> = rx
        .got()
        .iter()
        .map(|g| g.headers["webhook-id"].to_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 60, "one request per event");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 60, "no event twice");
}

/// A lease that fails in an ingest's transaction does not refuse the
/// events: the group is written again without it, and the deliveries
/// wait, pending, for the claim loops (which meet the same fault and
/// back off). The next ingest wakes a loop for them even if its own
/// lease took all it could (with one clock instant, it may take its own
/// delivery before theirs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_fails_at_ingest_does_not_refuse_the_events() {
    let db = TestDb::sqlite().await;
    db.store
        .execute_script(
            "CREATE TRIGGER no_leases BEFORE UPDATE OF state ON deliveries \
             WHEN NEW.state = 'in_flight' \
             BEGIN SELECT RAISE(ABORT, 'planted fault: no leases'); END; \
             CREATE TRIGGER no_new_leases BEFORE INSERT ON deliveries \
             WHEN NEW.state = 'in_flight' \
             BEGIN SELECT RAISE(ABORT, 'planted fault: no leases'); END;",
        )
        .await
        .unwrap();
    let config = with_workers(|d| d.poll_interval = Duration::from_secs(3600));
    let api = Api::with_config(db.store.clone(), config).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    let sent = send_many(&api, 2).await;
    for event in &sent {
        assert_eq!(
            api.delivery(event).await.state(),
            Some(DeliveryState::Pending)
        );
    }
    db.store
        .execute_script("DROP TRIGGER no_leases; DROP TRIGGER no_new_leases")
        .await
        .unwrap();
    // The loops backed off after their failed claims; a new event wakes
    // one, and with its ingest's lease they take all three.
    send_many(&api, 1).await;
    wait_delivered(&api.app.store, 3).await;
    assert_eq!(rx.count(), 3);
    drop(api);
    db.finish().await;
}

/// On Postgres a node that ingests wakes the workers of every other node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn another_node_wakes_on_postgres_notify() {
    let db = TestDb::postgres().await;
    let idle_worker = with_workers(|d| d.poll_interval = Duration::from_secs(3600));
    let api = Api::new(db.store.clone()).await; // this node runs no workers
    let worker_node = spawn_node(db.another_node().await, idle_worker, api.app.clock.clone()).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;

    wait_until_listening(&db).await;
    send_many(&api, 1).await;
    rx.wait_for(1).await;
    wait_delivered(&api.app.store, 1).await;
    send_many(&api, 1).await;
    rx.wait_for(2).await;

    worker_node.shutdown().await;
    drop(api);
    db.finish().await;
}

/// On Postgres a node with workers announces new work only while another
/// node's workers listen: alone, its own workers, woken directly, are all
/// there is. (What its own workers leased at ingest is never announced;
/// here their room is one delivery, held by a slow receiver, so the
/// second of each pair of events is left due.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn a_node_announces_work_only_while_another_listens() {
    let db = TestDb::postgres().await;
    let Raw::Postgres(pool) = &db.raw().await else {
        unreachable!("postgres only");
    };
    let channel = format!("dakghar_work_{}", db.store.pg_schema().unwrap());
    // The test's markers travel on a channel of their own, which the node
    // does not hear: one session receives both channels in commit order.
    let markers = format!("{channel}_test_markers");
    let mut heard = sqlx::postgres::PgListener::connect_with(pool)
        .await
        .unwrap();
    heard.listen_all([&*channel, &*markers]).await.unwrap();
    let one_at_a_time = with_workers(|d| {
        d.workers = 1;
        d.batch_size = 1;
    });
    let api = Api::with_config(db.store.clone(), one_at_a_time).await;
    let rx = Receiver::start().await;
    rx.delay(Duration::from_millis(200));
    api.endpoint(&rx).await;
    let hello = next_payload(&mut heard).await;
    let node = hello
        .strip_suffix(".hello")
        .expect("a node with workers says it listens")
        .to_string();

    send_many(&api, 3).await;
    rx.wait_for(3).await;
    wait_delivered(&api.app.store, 3).await;
    let sent = payloads_until(&mut heard, pool, &markers, "alone").await;
    assert!(!sent.contains(&node), "alone, it announced: {sent:?}");

    let idle_worker = with_workers(|d| d.poll_interval = Duration::from_secs(3600));
    let other = spawn_node(db.another_node().await, idle_worker, api.app.clock.clone()).await;
    loop {
        let p = next_payload(&mut heard).await;
        if p.ends_with(".hello") && p != hello {
            break;
        }
    }
    // The node hears the other's hello as this test does, at about the
    // same time: new work is announced from then on.
    let mut announced = false;
    for n in 1..=20 {
        send_many(&api, 2).await;
        wait_delivered(&api.app.store, 3 + 2 * n).await;
        let marker = format!("then {n}");
        let sent = payloads_until(&mut heard, pool, &markers, &marker).await;
        if sent.contains(&node) {
            announced = true;
            break;
        }
    }
    assert!(
        announced,
        "with another node listening, new work is announced"
    );

    other.shutdown().await;
    drop(api);
    db.finish().await;
}

async fn next_payload(listener: &mut sqlx::postgres::PgListener) -> String {
    let n = tokio::time::timeout(Duration::from_secs(30), listener.recv())
        .await
        .expect("a notification within 30 s")
        .unwrap();
    n.payload().to_string()
}

/// What the listener heard before `marker`, which this sends on
/// `markers` now.
async fn payloads_until(
    listener: &mut sqlx::postgres::PgListener,
    pool: &sqlx::PgPool,
    markers: &str,
    marker: &str,
) -> Vec<String> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(markers)
        .bind(marker)
        .execute(pool)
        .await
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let p = next_payload(listener).await;
        if p == marker {
            return seen;
        }
        seen.push(p);
    }
}

/// Until the worker node's LISTEN is in place, a notification would be missed.
async fn wait_until_listening(db: &TestDb) {
    let Raw::Postgres(pool) = &db.raw().await else {
        unreachable!("postgres only");
    };
    let schema = format!("%{}%", db.store.pg_schema().unwrap());
    wait_for_activity(
        pool,
        "query LIKE 'LISTEN %' AND query LIKE $1",
        &[&schema],
        Duration::from_secs(30),
        "the worker node never listened",
    )
    .await;
}
