//! The delivery engine and REST API end to end: real server, real receiver,
//! real database on both backends, the test clock.

use std::time::Duration;

use dakghar::{
    clock::{Clock, Timestamp},
    store::{DeliveryState, Store},
};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::{api_client::Api, helpers::StateOf, receiver::Receiver};

on_both_backends!(
    a_signed_event_reaches_the_receiver_and_verifies,
    five_hundreds_are_retried_with_backoff_until_delivered,
    gone_fails_at_once_and_pauses_the_endpoint,
    not_found_is_retried,
    retry_after_is_honoured,
    deliveries_expire_by_window_and_by_attempts,
    a_worker_panic_counts_no_attempt_and_backs_off,
    ingest_rejects_bad_input_and_is_idempotent,
    another_accounts_ids_are_not_found,
    resend_resets_the_delivery_and_keeps_history,
    two_changes_at_once_to_one_endpoint_both_stick,
);

async fn a_signed_event_reaches_the_receiver_and_verifies(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;

    let ev = api
        .send(json!({ "id": "evt_first", "type": "invoice.paid", "payload": {"amount": 42, "note": "héllo ✓"} }))
        .await;
    assert_eq!(ev["id"], "evt_first");
    assert_eq!(ev["deliveries"].as_array().unwrap().len(), 1);
    assert_eq!(api.tick().await, 1);

    let got = rx.got();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].verified,
        Some(true),
        "standardwebhooks accepts the signature"
    );
    assert_eq!(got[0].headers["webhook-id"], "evt_first");
    assert_eq!(got[0].headers["content-type"], "application/json");
    assert!(got[0].headers["user-agent"]
        .to_str()
        .unwrap()
        .starts_with("Dakghar"));
    assert_eq!(
        &got[0].body[..],
        r#"{"amount":42,"note":"héllo ✓"}"#.as_bytes(),
        "the payload byte for byte"
    );

    let d = api.detail("evt_first").await;
    let delivery = &d["deliveries"][0];
    assert_eq!(delivery["state"], "delivered");
    let attempt = &delivery["attempts"][0];
    assert_eq!(
        (attempt["attempt"].as_i64(), attempt["status"].as_i64()),
        (Some(1), Some(200))
    );
    assert_eq!(attempt["response_snippet"], "receiver says hi");
    assert!(attempt["explanation"]
        .as_str()
        .unwrap()
        .starts_with("200 OK"));
    assert_eq!(d["payload"]["note"], "héllo ✓");
}

async fn five_hundreds_are_retried_with_backoff_until_delivered(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    rx.script(&[500, 500]);
    let ev = api.send(json!({ "type": "t", "payload": {"n": 1} })).await;

    assert_eq!(api.tick().await, 1);
    let after_first = api.delivery(&ev).await;
    assert_eq!(after_first.state(), Some(DeliveryState::Pending));
    let wait1 = after_first.next_attempt_at - api.app.clock.now().millis();
    assert!(
        (30_000..=60_000).contains(&wait1),
        "first backoff in [30 s, 60 s]: {wait1}"
    );
    assert_eq!(api.tick().await, 0, "not before its time");

    api.advance(Duration::from_millis(wait1 as u64));
    assert_eq!(api.tick().await, 1);
    let after_second = api.delivery(&ev).await;
    let wait2 = after_second.next_attempt_at - api.app.clock.now().millis();
    assert!(
        (60_000..=120_000).contains(&wait2),
        "second backoff in [60 s, 120 s]: {wait2}"
    );

    api.advance(Duration::from_millis(wait2 as u64));
    assert_eq!(api.tick().await, 1);
    let done = api.delivery(&ev).await;
    assert_eq!(done.state(), Some(DeliveryState::Delivered));
    assert_eq!(done.attempt_seq, 3);

    let got = rx.got();
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|g| g.verified == Some(true)));
    let ids: Vec<_> = got
        .iter()
        .map(|g| g.headers["webhook-id"].clone())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] == w[1]),
        "same webhook-id on every attempt"
    );
    assert!(
        got.windows(2).all(|w| w[0].body == w[1].body),
        "identical body bytes"
    );
    assert_ne!(
        got[0].headers["webhook-timestamp"], got[2].headers["webhook-timestamp"],
        "fresh timestamp"
    );
    let d = api.detail(ev["id"].as_str().unwrap()).await;
    let statuses: Vec<_> = d["deliveries"][0]["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_i64().unwrap())
        .collect();
    assert_eq!(statuses, vec![500, 500, 200]);
}

async fn gone_fails_at_once_and_pauses_the_endpoint(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    rx.script(&[410]);
    let ev = api.send(json!({ "type": "t", "payload": {} })).await;
    api.tick().await;

    let d = api.delivery(&ev).await;
    assert_eq!((d.state(), d.attempt_seq), (Some(DeliveryState::Failed), 1));
    let (_, ep_now) = api
        .call(
            reqwest::Method::GET,
            &format!("/api/v1/endpoints/{}", ep["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(ep_now["state"], "paused");
    assert!(ep_now["pause_reason"].as_str().unwrap().contains("410"));
    let acc = api
        .app
        .store
        .endpoint_by_id(ep["id"].as_str().unwrap())
        .await
        .unwrap()
        .account_id;
    let notes = api.app.store.notifications(&acc).await.unwrap();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].kind, "endpoint_paused");

    // A paused endpoint still queues, and resume drains the queue.
    let queued = api
        .send(json!({ "type": "t", "payload": {"later": true} }))
        .await;
    assert_eq!(api.tick().await, 0, "nothing sent while paused");
    let (s, _) = api
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/endpoints/{}/resume", ep["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(api.tick().await, 1);
    assert_eq!(
        api.delivery(&queued).await.state(),
        Some(DeliveryState::Delivered)
    );
}

async fn not_found_is_retried(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    rx.script(&[404]);
    let ev = api.send(json!({ "type": "t", "payload": {} })).await;
    api.tick().await;
    let d = api.delivery(&ev).await;
    assert_eq!(d.state(), Some(DeliveryState::Pending));
    let e = api
        .app
        .store
        .endpoint_by_id(ep["id"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(e.failure_streak, 1, "404 counts toward the failure streak");
}

async fn retry_after_is_honoured(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    rx.script_with_headers(429, vec![("retry-after", "120".into())]);
    let ev = api.send(json!({ "type": "t", "payload": {} })).await;
    api.tick().await;
    let d = api.delivery(&ev).await;
    let wait = d.next_attempt_at - api.app.clock.now().millis();
    assert!(
        wait >= 120_000,
        "waits at least the 120 s asked for: {wait}"
    );

    // A wait past the retry window expires the delivery now, saying why.
    let rx2 = Receiver::start().await;
    let (_, ep2) = api
        .call(
            reqwest::Method::POST,
            "/api/v1/endpoints",
            Some(json!({ "url": rx2.url, "event_types": ["slow"] })),
        )
        .await;
    assert!(ep2["id"].is_string());
    rx2.script_with_headers(503, vec![("retry-after", "99999999999999".into())]);
    let slow = api.send(json!({ "type": "slow", "payload": {} })).await;
    api.tick().await;
    let to_rx2 = slow["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["endpoint_id"] == ep2["id"])
        .unwrap();
    let s = api
        .app
        .store
        .delivery(to_rx2["id"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(s.state(), Some(DeliveryState::Expired));
    assert!(s.last_error.unwrap().contains("Retry-After"));
}

async fn deliveries_expire_by_window_and_by_attempts(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    rx.script(&[500; 40]);
    let ev = api.send(json!({ "type": "t", "payload": {} })).await;
    api.tick().await;
    api.advance(Duration::from_secs(72 * 3600));
    api.tick().await;
    let d = api.delivery(&ev).await;
    assert_eq!(d.state(), Some(DeliveryState::Expired));
    assert_eq!(d.attempt_seq, 1, "no attempt after the window");

    // By attempts: 16 failures, each after its backoff.
    let ev = api.send(json!({ "type": "t", "payload": {} })).await;
    for _ in 0..16 {
        api.tick().await;
        api.advance(Duration::from_secs(3600));
    }
    let d = api.delivery(&ev).await;
    assert_eq!(
        d.state(),
        Some(DeliveryState::Expired),
        "{:?}",
        d.last_error
    );
    assert_eq!(d.attempt_seq, 16);
    assert!(d.last_error.unwrap().contains("16 attempts"));
}

/// A panic is a fault of ours: no attempt counts, nothing is sent, and the
/// delivery waits a little instead of being claimed again at once.
async fn a_worker_panic_counts_no_attempt_and_backs_off(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    let ev = api.send(json!({ "type": "t", "payload": {} })).await;
    let before = api.delivery(&ev).await;
    api.app.engine.set_fault_hook(Some(std::sync::Arc::new(|_| {
        panic!("planted worker fault")
    })));
    assert_eq!(api.tick().await, 1);
    let after = api.delivery(&ev).await;
    assert_eq!(after.state(), Some(DeliveryState::Pending));
    assert_eq!(
        (after.attempts, after.attempt_seq),
        (before.attempts, before.attempt_seq)
    );
    assert_eq!(after.next_attempt_at, api.app.clock.now().millis() + 5_000);
    assert!(rx.got().is_empty());
    assert_eq!(api.tick().await, 0, "not claimed again at once");

    api.app.engine.set_fault_hook(None);
    api.advance(Duration::from_secs(5));
    assert_eq!(api.tick().await, 1, "the worker keeps running");
    assert_eq!(
        api.delivery(&ev).await.state(),
        Some(DeliveryState::Delivered)
    );
}

async fn ingest_rejects_bad_input_and_is_idempotent(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    let url = api.app.url("/api/v1/events");
    let post = |key: &str, ctype: &str, body: Vec<u8>| {
        api.http
            .post(&url)
            .bearer_auth(key)
            .header("content-type", ctype)
            .body(body)
            .send()
    };
    let error_of = |res: reqwest::Response| async move {
        let status = res.status();
        let v: Value = res.json().await.unwrap();
        (
            status,
            v["error"]["code"].as_str().unwrap_or_default().to_string(),
        )
    };
    let json = "application/json";
    let cases: Vec<(&str, &str, Vec<u8>, StatusCode, &str)> = vec![
        (
            "dk_unknown",
            json,
            br#"{"type":"t","payload":{}}"#.to_vec(),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            &api.key,
            "text/plain",
            br#"{"type":"t","payload":{}}"#.to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
        (
            &api.key,
            json,
            b"{not json".to_vec(),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            &api.key,
            json,
            b"".to_vec(),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            &api.key,
            json,
            br#"{"payload":{}}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "missing_type",
        ),
        (
            &api.key,
            json,
            br#"{"type":"t"}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "missing_payload",
        ),
        (
            &api.key,
            json,
            format!(r#"{{"type":"t","payload":"{}"}}"#, "x".repeat(300 * 1024)).into_bytes(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
    ];
    for (key, ctype, body, status, code) in cases {
        let (s, c) = error_of(post(key, ctype, body).await.unwrap()).await;
        assert_eq!((s, c.as_str()), (status, code));
    }
    let missing = api
        .http
        .post(&url)
        .header("content-type", json)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        api.app
            .store
            .count_deliveries(DeliveryState::Pending)
            .await
            .unwrap(),
        0,
        "nothing stored"
    );

    let first = api
        .send(json!({ "id": "order-1", "type": "t", "payload": {"v": 1, "w": 2} }))
        .await;
    let reordered = post(
        &api.key,
        json,
        br#"{"id":"order-1","type":"t","payload":{ "w": 2, "v": 1 }}"#.to_vec(),
    )
    .await
    .unwrap();
    assert_eq!(reordered.status(), StatusCode::ACCEPTED);
    assert_eq!(
        reordered.json::<Value>().await.unwrap(),
        first,
        "the same event written another way: the first result, nothing new"
    );
    let header = |payload: Value| {
        api.http
            .post(&url)
            .bearer_auth(&api.key)
            .header("idempotency-key", "order-1")
            .json(&json!({ "type": "t", "payload": payload }))
            .send()
    };
    let by_header = header(json!({"v": 1, "w": 2})).await.unwrap();
    assert_eq!(by_header.json::<Value>().await.unwrap(), first);
    for (why, body) in [
        (
            "another payload",
            json!({ "id": "order-1", "type": "t", "payload": {"v": 2, "w": 2} }),
        ),
        (
            "another type",
            json!({ "id": "order-1", "type": "u", "payload": {"v": 1, "w": 2} }),
        ),
    ] {
        let (s, out) = api
            .call(reqwest::Method::POST, "/api/v1/events", Some(body))
            .await;
        assert_eq!(s, StatusCode::CONFLICT, "{why}: {out}");
        assert_eq!(out["error"]["code"], "idempotency_conflict", "{why}");
        let message = out["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("order-1"),
            "names the first event: {message}"
        );
    }
    let (s, code) = error_of(header(json!({})).await.unwrap()).await;
    assert_eq!(
        (s, code.as_str()),
        (StatusCode::CONFLICT, "idempotency_conflict")
    );
    let acme = api.app.store.account_by_name("acme").await.unwrap();
    let stored = api.app.store.event(&acme.id, "order-1").await.unwrap();
    assert_eq!(stored.event_type, "t", "the first event is kept");
    assert_eq!(
        api.app
            .store
            .count_deliveries(DeliveryState::Pending)
            .await
            .unwrap(),
        1
    );
}

async fn another_accounts_ids_are_not_found(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    let ev = api.send(json!({ "type": "t", "payload": {} })).await;
    let other = Api::key_for(&api.app, "other").await;
    let ep_id = ep["id"].as_str().unwrap();
    let dlv = ev["deliveries"][0]["id"].as_str().unwrap();
    let evt = ev["id"].as_str().unwrap();
    use reqwest::Method as M;
    for (m, path) in [
        (M::GET, format!("/api/v1/endpoints/{ep_id}")),
        (M::PATCH, format!("/api/v1/endpoints/{ep_id}")),
        (M::DELETE, format!("/api/v1/endpoints/{ep_id}")),
        (M::POST, format!("/api/v1/endpoints/{ep_id}/pause")),
        (M::POST, format!("/api/v1/endpoints/{ep_id}/resume")),
        (M::POST, format!("/api/v1/endpoints/{ep_id}/rotate-secret")),
        (M::GET, format!("/api/v1/endpoints/{ep_id}/health")),
        (M::GET, format!("/api/v1/events/{evt}")),
        (M::POST, format!("/api/v1/deliveries/{dlv}/resend")),
    ] {
        let body = (m == M::PATCH).then(|| json!({ "description": "x" }));
        let (s, v) = api.call_as(&other, m.clone(), &path, body).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{m} {path}: {v}");
        assert_eq!(v["error"]["code"], "not_found");
    }
    let (_, list) = api.call_as(&other, M::GET, "/api/v1/events", None).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 0);
    let (_, e) = api
        .call(M::GET, &format!("/api/v1/endpoints/{ep_id}"), None)
        .await;
    assert_eq!(e["state"], "active", "nothing changed");

    let (s, v) = api
        .call(
            M::POST,
            "/api/v1/endpoints",
            Some(json!({ "url": "ftp://example.com/" })),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_url"))
    );
}

async fn resend_resets_the_delivery_and_keeps_history(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    rx.script(&[400]);
    let ev = api.send(json!({ "type": "t", "payload": {} })).await;
    api.tick().await;
    let failed = api.delivery(&ev).await;
    assert_eq!(failed.state(), Some(DeliveryState::Failed));

    let (s, _) = api
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/deliveries/{}/resend", failed.id),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let reset = api.delivery(&ev).await;
    assert_eq!(
        (reset.state(), reset.attempts, reset.last_error.clone()),
        (Some(DeliveryState::Pending), 0, None)
    );
    assert_eq!(
        reset.give_up_at,
        api.app
            .clock
            .now()
            .plus(Duration::from_secs(72 * 3600))
            .millis()
    );
    api.tick().await;
    let done = api.delivery(&ev).await;
    assert_eq!(
        (done.state(), done.attempt_seq),
        (Some(DeliveryState::Delivered), 2),
        "attempt numbers continue"
    );

    let (s, v) = api
        .call(
            reqwest::Method::GET,
            &format!(
                "/api/v1/events?state=delivered&since={}",
                Timestamp(0).to_rfc3339()
            ),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["data"].as_array().unwrap().len(), 1);
}

/// PATCH read the endpoint, then wrote every field back: of two changes to
/// different fields at once, the later write undid the earlier one.
async fn two_changes_at_once_to_one_endpoint_both_stick(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    let ep_id = ep["id"].as_str().unwrap().to_string();
    let path = format!("/api/v1/endpoints/{ep_id}");
    for round in 0..20 {
        let url = format!("{}?round={round}", rx.url);
        let description = format!("round {round}");
        let (a, b) = tokio::join!(
            api.call(
                reqwest::Method::PATCH,
                &path,
                Some(json!({ "description": description }))
            ),
            api.call(
                reqwest::Method::PATCH,
                &path,
                Some(json!({ "url": url, "max_in_flight": round + 1 }))
            ),
        );
        assert_eq!(a.0, StatusCode::OK, "{}", a.1);
        assert_eq!(b.0, StatusCode::OK, "{}", b.1);
        let (_, now) = api.call(reqwest::Method::GET, &path, None).await;
        assert_eq!(
            now["description"],
            description.as_str(),
            "round {round}: {now}"
        );
        assert_eq!(now["url"], url.as_str(), "round {round}: {now}");
        assert_eq!(now["max_in_flight"], round + 1, "round {round}: {now}");
    }
    // Fields a patch does not name stay, and null clears a limit.
    let (_, after) = api
        .call(
            reqwest::Method::PATCH,
            &path,
            Some(json!({ "rate_limit_per_sec": 7 })),
        )
        .await;
    assert_eq!(after["rate_limit_per_sec"], 7);
    assert_eq!(after["description"], "round 19");
    let (_, after) = api
        .call(
            reqwest::Method::PATCH,
            &path,
            Some(json!({ "rate_limit_per_sec": null })),
        )
        .await;
    assert!(after["rate_limit_per_sec"].is_null(), "{after}");
    assert_eq!(after["max_in_flight"], 20);
}
