//! Bulk replay through the admin API on both backends: preview counts,
//! the spread over the window within rate limits, progress, cancel, the
//! audit log and notifications, and the gate in front of it all.

use std::time::Duration;

use dakghar::{
    auth::api_key,
    clock::Clock,
    config::ServeConfig,
    store::{DeliveryState, Store},
};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::{
    dashboard_events::{customer, tick_until_idle, Customer},
    helpers::{spawn_app_with, StateOf, TestApp},
    receiver::Receiver,
};

on_both_backends!(
    preview_counts_per_endpoint_and_changes_nothing,
    confirm_spreads_the_redeliveries_and_respects_rate_limits,
    progress_and_cancel_put_the_rest_back,
    cancel_keeps_what_may_have_arrived_and_a_finished_replay_is_done,
    members_get_403_and_anonymous_401_on_every_admin_route,
    a_paused_backlog_is_replayed_into_a_fresh_window_and_cancel_restores_it,
    a_large_replay_is_announced_before_its_first_redelivery,
);

async fn admin_key(app: &TestApp, account_id: &str) -> String {
    let k = api_key::generate();
    app.store
        .create_api_key(account_id, "", &k.prefix, &k.hash, true, app.clock.now())
        .await
        .unwrap();
    k.key
}

async fn admin(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = reqwest::Client::new()
        .request(method, app.url(path))
        .bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// `n` events to a receiver that refuses them all with 400: `n` failed
/// deliveries. Returns the endpoint's id.
async fn dead_letters(
    app: &TestApp,
    who: &Customer,
    rx: &Receiver,
    n: usize,
    extra: Value,
) -> String {
    rx.script(&vec![400; n]);
    // A type of its own, so events for the next endpoint do not reach it.
    let event_type = format!("order.{}", rx.url.trim_start_matches("http://"));
    let mut body = json!({ "url": rx.url, "max_in_flight": 100, "event_types": [event_type] });
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let ep = who.api(app, "/api/v1/endpoints", body).await;
    for i in 0..n {
        who.api(
            app,
            "/api/v1/events",
            json!({ "type": event_type, "payload": { "n": i } }),
        )
        .await;
    }
    tick_until_idle(app).await;
    ep["id"].as_str().unwrap().to_string()
}

async fn preview_counts_per_endpoint_and_changes_nothing(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let bob = customer(&app, "Bobco", "bob@bobco.example").await;
    let key = admin_key(&app, &ana.seeded.account.id).await;
    let ana_rx = Receiver::start().await;
    let bob_rx = Receiver::start().await;
    let ana_ep = dead_letters(&app, &ana, &ana_rx, 7, json!({})).await;
    let bob_ep = dead_letters(&app, &bob, &bob_rx, 3, json!({})).await;

    let (status, preview) = admin(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/admin/replays",
        Some(json!({ "criteria": { "states": ["failed"] }, "dry_run": true })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    assert_eq!(preview["total"], 10);
    let groups = preview["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(
        (
            groups[0]["endpoint_id"].as_str(),
            groups[0]["count"].as_i64()
        ),
        (Some(ana_ep.as_str()), Some(7))
    );
    assert_eq!(groups[0]["account_name"], "Acme");
    assert_eq!(
        (
            groups[1]["endpoint_id"].as_str(),
            groups[1]["count"].as_i64()
        ),
        (Some(bob_ep.as_str()), Some(3))
    );

    let (_, only_bob) = admin(&app, &key, reqwest::Method::POST, "/api/v1/admin/replays",
        Some(json!({ "criteria": { "states": ["failed"], "account_id": bob.seeded.account.id }, "dry_run": true }))).await;
    assert_eq!(only_bob["total"], 3);
    let (_, expired_only) = admin(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/admin/replays",
        Some(json!({ "criteria": { "states": ["expired"] }, "dry_run": true })),
    )
    .await;
    assert_eq!(expired_only["total"], 0);
    let (_, other_type) = admin(&app, &key, reqwest::Method::POST, "/api/v1/admin/replays",
        Some(json!({ "criteria": { "states": ["failed", "expired"], "type": "order.nope" }, "dry_run": true }))).await;
    assert_eq!(other_type["total"], 0);

    assert_eq!(
        app.store
            .count_deliveries(DeliveryState::Failed)
            .await
            .unwrap(),
        10,
        "a preview changes nothing"
    );
    assert!(
        app.store.replays(None, 10).await.unwrap().is_empty(),
        "and is not a replay"
    );

    for (body, expect) in [
        (
            json!({ "criteria": { "states": [] }, "dry_run": true }),
            "at least one state",
        ),
        (
            json!({ "criteria": { "states": ["delivered"] }, "dry_run": true }),
            "only failed, expired and pending",
        ),
        (
            json!({ "criteria": { "states": ["failed"], "since": "yesterday" }, "dry_run": true }),
            "RFC 3339",
        ),
        (
            json!({ "criteria": { "states": ["failed"] }, "window": "2 fortnights" }),
            "duration",
        ),
        (
            json!({ "criteria": { "states": ["failed"], "account_id": "acc_nope" } }),
            "no account",
        ),
    ] {
        let (status, err) = admin(
            &app,
            &key,
            reqwest::Method::POST,
            "/api/v1/admin/replays",
            Some(body),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
        assert!(
            err["error"]["message"].as_str().unwrap().contains(expect),
            "{err}"
        );
    }
}

async fn confirm_spreads_the_redeliveries_and_respects_rate_limits(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let key = admin_key(&app, &ana.seeded.account.id).await;
    let fast = Receiver::start().await;
    let slow = Receiver::start().await;
    let fast_ep = dead_letters(&app, &ana, &fast, 60, json!({})).await;
    let slow_ep = dead_letters(&app, &ana, &slow, 20, json!({})).await;
    // Limited after the first round, which would otherwise take 20 s.
    let patched = reqwest::Client::new()
        .patch(app.url(&format!("/api/v1/endpoints/{slow_ep}")))
        .bearer_auth(ana.key())
        .json(&json!({ "rate_limit_per_sec": 1 }))
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), StatusCode::OK);
    let started_at = app.clock.now().millis();

    let (status, replay) = admin(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/admin/replays",
        Some(
            json!({ "criteria": { "states": ["failed"], "endpoint_id": fast_ep }, "window": "5m" }),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{replay}");
    assert_eq!(replay["count"], 60);
    assert_eq!(replay["status"], "running");

    let schedule = |ep: String| {
        let store = app.store.clone();
        let account = ana.seeded.account.id.clone();
        async move {
            let filter = dakghar::store::EventFilter {
                endpoint_id: Some(ep.clone()),
                ..Default::default()
            };
            let page = store.list_events(&account, &filter, 100).await.unwrap();
            let mut at = Vec::new();
            for d in page
                .events
                .into_iter()
                .flat_map(|(_, ds)| ds)
                .filter(|d| d.endpoint_id == ep)
            {
                assert_eq!(
                    (d.state(), d.attempts),
                    (Some(DeliveryState::Pending), 0),
                    "reset like a resend"
                );
                assert!(
                    d.give_up_at > started_at + 71 * 3_600_000,
                    "a fresh deadline"
                );
                assert_eq!(
                    d.attempt_seq, 1,
                    "history kept: the next attempt is number 2"
                );
                at.push(d.next_attempt_at - started_at);
            }
            at.sort();
            at
        }
    };
    let fast_at = schedule(fast_ep.clone()).await;
    assert_eq!(fast_at.len(), 60);
    assert!(
        fast_at.iter().all(|ms| (0..300_000).contains(ms)),
        "inside the 5 min window"
    );
    let first_second = fast_at.iter().filter(|ms| **ms < 1000).count();
    assert!(
        first_second <= 2,
        "spread, not all at once: {first_second} in the first second"
    );
    let first_third = fast_at.iter().filter(|ms| **ms < 100_000).count();
    assert!(
        (15..=25).contains(&first_third),
        "uniform: {first_third} of 60 in the first third"
    );

    // A 10 s window would mean 2 per second; the endpoint takes 1.
    let (_, slow_replay) = admin(&app, &key, reqwest::Method::POST, "/api/v1/admin/replays",
        Some(json!({ "criteria": { "states": ["failed"], "endpoint_id": slow_ep }, "window": "10s" }))).await;
    assert_eq!(slow_replay["count"], 20);
    let slow_at = schedule(slow_ep).await;
    for pair in slow_at.windows(2) {
        assert!(
            pair[1] - pair[0] >= 1000,
            "one per second for the rate-limited endpoint: {slow_at:?}"
        );
    }
    assert!(
        slow_at[19] >= 19_000,
        "the rate limit wins over the window: {slow_at:?}"
    );

    app.clock.advance(Duration::from_secs(301));
    for _ in 0..25 {
        tick_until_idle(&app).await;
        app.clock.advance(Duration::from_secs(1));
    }
    assert_eq!(
        app.store
            .count_deliveries(DeliveryState::Delivered)
            .await
            .unwrap(),
        80
    );
    assert_eq!(fast.count(), 60 + 60);

    let audit = app.store.replays(None, 10).await.unwrap();
    assert_eq!(audit.len(), 2);
    let first = audit
        .iter()
        .find(|r| r.criteria.contains(&fast_ep))
        .expect("audited");
    assert_eq!((first.kind.as_str(), first.count), ("bulk", 60));
    assert!(first.actor.starts_with("api_key:"));
    let notes = app
        .store
        .notifications(&ana.seeded.account.id)
        .await
        .unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.kind == "replay"
                && n.subject == "We are redelivering 60 events, expect a spike"),
        "{notes:?}"
    );
}

async fn progress_and_cancel_put_the_rest_back(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let key = admin_key(&app, &ana.seeded.account.id).await;
    let rx = Receiver::start().await;
    dead_letters(&app, &ana, &rx, 10, json!({})).await;

    let before: std::collections::HashMap<String, dakghar::store::Delivery> = {
        let account = ana.seeded.account.id.clone();
        let page = app
            .store
            .list_events(&account, &Default::default(), 100)
            .await
            .unwrap();
        page.events
            .into_iter()
            .flat_map(|(_, ds)| ds)
            .map(|d| (d.id.clone(), d))
            .collect()
    };
    let (_, replay) = admin(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/admin/replays",
        Some(json!({ "criteria": { "states": ["failed"] }, "window": "10m" })),
    )
    .await;
    let id = replay["id"].as_str().unwrap().to_string();
    // Half the window: about half the replayed deliveries are due.
    app.clock.advance(Duration::from_secs(300));
    tick_until_idle(&app).await;
    let (status, progress) = admin(
        &app,
        &key,
        reqwest::Method::GET,
        &format!("/api/v1/admin/replays/{id}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let delivered = progress["progress"]["delivered"].as_i64().unwrap();
    let pending = progress["progress"]["pending"].as_i64().unwrap();
    assert_eq!(delivered + pending, 10, "{progress}");
    assert!((4..=6).contains(&delivered), "{progress}");

    let (status, cancelled) = admin(
        &app,
        &key,
        reqwest::Method::POST,
        &format!("/api/v1/admin/replays/{id}/cancel"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cancelled["returned_to_dead_letter"], pending);
    assert_eq!(
        app.store
            .count_deliveries(DeliveryState::Failed)
            .await
            .unwrap(),
        pending
    );
    assert_eq!(
        app.store
            .count_deliveries(DeliveryState::Delivered)
            .await
            .unwrap(),
        delivered
    );
    let (_, after) = admin(
        &app,
        &key,
        reqwest::Method::GET,
        &format!("/api/v1/admin/replays/{id}"),
        None,
    )
    .await;
    assert_eq!(after["status"], "cancelled");
    assert_eq!(after["progress"]["pending"], 0);
    let mut restored = 0;
    for (id, was) in &before {
        let now = app.store.delivery(id).await.unwrap();
        if now.state() == Some(DeliveryState::Failed) {
            assert_eq!(
                (
                    now.attempts,
                    now.give_up_at,
                    now.finished_at,
                    &now.last_error
                ),
                (
                    was.attempts,
                    was.give_up_at,
                    was.finished_at,
                    &was.last_error
                ),
                "the same dead letter as before the replay"
            );
            restored += 1;
        }
    }
    assert_eq!(restored as i64, pending);

    app.clock.advance(Duration::from_secs(600));
    assert_eq!(app.engine.tick().await.unwrap(), 0, "nothing left to send");
    assert_eq!(rx.count() as i64, 10 + delivered);

    let (status, _) = admin(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/admin/replays/rpl_nope/cancel",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, log) = admin(
        &app,
        &key,
        reqwest::Method::GET,
        "/api/v1/admin/replays",
        None,
    )
    .await;
    assert_eq!(log["data"][0]["id"], id.as_str());
}

async fn members_get_403_and_anonymous_401_on_every_admin_route(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let routes = [
        (
            reqwest::Method::POST,
            "/api/v1/admin/replays",
            Some(json!({ "criteria": { "states": ["failed"] }, "dry_run": true })),
        ),
        (reqwest::Method::GET, "/api/v1/admin/replays", None),
        (reqwest::Method::GET, "/api/v1/admin/replays/rpl_x", None),
        (
            reqwest::Method::POST,
            "/api/v1/admin/replays/rpl_x/cancel",
            None,
        ),
    ];
    for (method, path, body) in &routes {
        let (status, _) = admin(&app, ana.key(), method.clone(), path, body.clone()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "member key: {method} {path}");

        let mut req = ana.web.request(method.clone(), app.url(path));
        if let Some(b) = body {
            req = req.json(b);
        }
        let status = req.send().await.unwrap().status();
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "member session: {method} {path}"
        );

        let status = reqwest::Client::new()
            .request(method.clone(), app.url(path))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "anonymous: {method} {path}"
        );
    }
}

async fn a_paused_backlog_is_replayed_into_a_fresh_window_and_cancel_restores_it(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let key = admin_key(&app, &ana.seeded.account.id).await;
    let rx = Receiver::start().await;
    let ep = ana
        .api(&app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    let ep_id = ep["id"].as_str().unwrap().to_string();
    ana.api(&app, &format!("/api/v1/endpoints/{ep_id}/pause"), json!({}))
        .await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let ev = ana
            .api(
                &app,
                "/api/v1/events",
                json!({ "type": "t", "payload": { "n": i } }),
            )
            .await;
        ids.push(ev["deliveries"][0]["id"].as_str().unwrap().to_string());
    }
    let before = app.store.delivery(&ids[0]).await.unwrap();
    app.clock.advance(Duration::from_secs(60 * 3600));

    let criteria = json!({ "states": ["pending"], "endpoint_id": ep_id });
    let (status, preview) = admin(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/admin/replays",
        Some(json!({ "criteria": criteria, "dry_run": true })),
    )
    .await;
    assert_eq!(
        (status, preview["total"].clone()),
        (StatusCode::OK, json!(3)),
        "{preview}"
    );
    let (status, replay) = admin(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/admin/replays",
        Some(json!({ "criteria": criteria, "window": "1m" })),
    )
    .await;
    assert!(status.is_success(), "{replay}");
    for id in &ids {
        let d = app.store.delivery(id).await.unwrap();
        assert_eq!(d.state(), Some(DeliveryState::Pending));
        assert_eq!(
            d.give_up_at - before.give_up_at,
            60 * 3_600_000,
            "a fresh window from the replay"
        );
    }
    let id = replay["id"].as_str().unwrap();
    let (status, cancelled) = admin(
        &app,
        &key,
        reqwest::Method::POST,
        &format!("/api/v1/admin/replays/{id}/cancel"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    let back = app.store.delivery(&ids[0]).await.unwrap();
    assert_eq!(
        back.state(),
        Some(DeliveryState::Pending),
        "back as it was: waiting"
    );
    assert_eq!(
        (back.give_up_at, back.finished_at),
        (before.give_up_at, None)
    );
    assert_eq!(rx.count(), 0, "paused throughout");
}

async fn a_large_replay_is_announced_before_its_first_redelivery(store: Store) {
    let mut config = ServeConfig::for_tests();
    config.replay_notice_threshold = 2;
    config.replay_notice = Duration::from_secs(600);
    let app = spawn_app_with(store, config).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let key = admin_key(&app, &ana.seeded.account.id).await;
    let rx = Receiver::start().await;
    dead_letters(&app, &ana, &rx, 3, json!({})).await;
    let (status, replay) = admin(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/admin/replays",
        Some(json!({ "criteria": { "states": ["failed"] }, "window": "1m" })),
    )
    .await;
    assert!(status.is_success(), "{replay}");
    let starts = app.clock.now().plus(Duration::from_secs(600));
    let notes = app
        .store
        .notifications(&ana.seeded.account.id)
        .await
        .unwrap();
    let notice = notes
        .iter()
        .find(|n| n.kind == "replay")
        .expect("the accounts are told at once");
    assert!(
        notice
            .subject
            .contains(&format!("from {}", starts.to_rfc3339())),
        "{}",
        notice.subject
    );
    // Nothing is redelivered before the announced time.
    app.clock.advance(Duration::from_secs(599));
    assert_eq!(
        app.engine.tick().await.unwrap(),
        0,
        "still the notice period"
    );
    assert_eq!(rx.count(), 3, "only the three first attempts so far");
    app.clock.advance(Duration::from_secs(62));
    tick_until_idle(&app).await;
    assert_eq!(rx.count(), 6, "redelivered after the notice");
}

/// A replayed delivery that a node claimed, and that came back without a
/// recorded attempt when its lease ran out (the node died after sending,
/// or its result was lost), may have reached the receiver: cancelling the
/// replay leaves it to be delivered instead of calling it a dead letter
/// again. And a replay whose deliveries were all attempted is `done`.
async fn cancel_keeps_what_may_have_arrived_and_a_finished_replay_is_done(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let key = admin_key(&app, &ana.seeded.account.id).await;
    let rx = Receiver::start().await;
    dead_letters(&app, &ana, &rx, 4, json!({})).await;
    let start = |window: &str| {
        admin(
            &app,
            &key,
            reqwest::Method::POST,
            "/api/v1/admin/replays",
            Some(json!({ "criteria": { "states": ["failed"] }, "window": window })),
        )
    };
    let (_, replay) = start("1m").await;
    let id = replay["id"].as_str().unwrap().to_string();
    app.clock.advance(Duration::from_secs(120));
    // A node claims one and vanishes; its lease runs out.
    let now = app.clock.now();
    let claimed = app
        .store
        .claim_due(now, now.plus(Duration::from_secs(5)), 1, Default::default())
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    app.clock.advance(Duration::from_secs(10));
    assert_eq!(
        app.store
            .rescue_expired_leases(app.clock.now())
            .await
            .unwrap(),
        1
    );
    let (status, cancelled) = admin(
        &app,
        &key,
        reqwest::Method::POST,
        &format!("/api/v1/admin/replays/{id}/cancel"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["returned_to_dead_letter"], 3, "{cancelled}");
    let kept = app.store.delivery(&claimed[0].id).await.unwrap();
    assert_eq!(
        kept.state(),
        Some(DeliveryState::Pending),
        "it may have arrived"
    );
    tick_until_idle(&app).await;
    let kept = app.store.delivery(&claimed[0].id).await.unwrap();
    assert_eq!(kept.state(), Some(DeliveryState::Delivered));

    // A replay that has attempted everything it reset is done.
    let (_, replay) = start("1m").await;
    let id = replay["id"].as_str().unwrap().to_string();
    let status_of = || async {
        let (_, r) = admin(
            &app,
            &key,
            reqwest::Method::GET,
            &format!("/api/v1/admin/replays/{id}"),
            None,
        )
        .await;
        r["status"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(status_of().await, "running");
    app.clock.advance(Duration::from_secs(120));
    tick_until_idle(&app).await;
    assert_eq!(status_of().await, "done");
    assert_eq!(
        rx.count(),
        4 + 1 + 3,
        "the first tries, the kept one, the three again"
    );
}
