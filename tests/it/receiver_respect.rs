//! Receivers are paced as a whole (SPEC §11): a 429/503 holds every
//! delivery of the endpoint and they come back spread out, uncounted; the
//! adaptive in-flight cap halves on overload and grows back. Real server,
//! real receiver, both backends, the test clock.

use std::time::Duration;

use dakghar::{
    clock::Clock,
    config::ServeConfig,
    store::{DeliveryState, Store},
};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::{api_client::Api, helpers::StateOf, receiver::Receiver};

on_both_backends!(
    a_429_holds_the_whole_endpoint_and_its_work_returns_spread,
    the_in_flight_cap_halves_on_overload_and_grows_back,
    a_timeout_halves_the_in_flight_cap,
    the_default_rate_limit_paces_endpoints_and_retries_spend_it,
    the_per_host_cap_bounds_two_accounts_endpoints_on_one_receiver,
    an_endpoints_retry_policy_decides_what_is_retried_and_when,
    a_paused_endpoints_backlog_expires_at_its_deadline,
    a_paused_queue_is_discarded_after_a_preview,
    a_paused_endpoints_waiting_delivery_can_be_resent_for_a_fresh_window,
);

async fn endpoint_view(api: &Api, id: &str) -> Value {
    let (s, ep) = api
        .call(Method::GET, &format!("/api/v1/endpoints/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{ep}");
    ep
}

/// Ticks until a tick claims nothing; returns how many it claimed in all.
async fn drain(api: &Api) -> usize {
    let mut claimed = 0;
    loop {
        match api.tick().await {
            0 => return claimed,
            n => claimed += n,
        }
    }
}

async fn a_429_holds_the_whole_endpoint_and_its_work_returns_spread(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint_with(&rx, json!({ "max_in_flight": 1 })).await;
    let ep_id = ep["id"].as_str().unwrap();
    rx.script_with_headers(429, vec![("retry-after", "30".into())]);
    let mut events = Vec::new();
    for i in 0..10 {
        events.push(
            api.send(json!({ "id": format!("evt_{i}"), "type": "t", "payload": {"i": i} }))
                .await,
        );
    }
    let start = api.app.clock.now().millis();
    assert_eq!(api.tick().await, 1);
    assert_eq!(rx.count(), 1, "one attempt, answered 429");
    // Which one went first is the claim's choice (same time, id order).
    let mut throttled = None;
    for (i, ev) in events.iter().enumerate() {
        if api.delivery(ev).await.last_status == Some(429) {
            throttled = Some(i);
        }
    }
    let first = events.remove(throttled.expect("the 429 is recorded"));

    let view = endpoint_view(&api, ep_id).await;
    assert_eq!(view["throttle_status"], 429);
    let note = view["throttle"].as_str().expect("the throttle in words");
    assert!(
        note.starts_with("throttled until ") && note.ends_with("(receiver asked, 429)"),
        "{note}"
    );

    // Up to the receiver's time nothing is claimed, and no wait is counted.
    api.advance(Duration::from_millis(29_900));
    assert_eq!(
        drain(&api).await,
        0,
        "nothing is due to a throttled endpoint"
    );
    assert_eq!(rx.count(), 1);
    for ev in &events {
        let d = api.delivery(ev).await;
        assert_eq!(d.attempts, 0, "the wait counts no attempt");
    }
    assert_eq!(
        api.delivery(&first).await.attempts,
        1,
        "the 429 itself was one"
    );

    // After it, the other nine come back over 3 s (a tenth of 30 s).
    let mut arrivals = Vec::new();
    for step in 0..=16 {
        let at = start + 30_000 + step * 250;
        let now = api.app.clock.now().millis();
        api.advance(Duration::from_millis(u64::try_from(at - now).unwrap()));
        drain(&api).await;
        arrivals.push(rx.count() - 1);
    }
    let others: Vec<_> = {
        let mut v = Vec::new();
        for ev in &events {
            v.push(api.delivery(ev).await);
        }
        v
    };
    assert!(
        others
            .iter()
            .all(|d| d.attempts == 0 && d.last_status == Some(200)),
        "each of the nine delivered at its first attempt: {others:?}"
    );
    let steps_with_arrivals =
        arrivals.windows(2).filter(|w| w[1] > w[0]).count() + usize::from(arrivals[0] > 0);
    assert!(
        steps_with_arrivals >= 3,
        "spread over the window, not all at once: {arrivals:?}"
    );
    assert!(
        *arrivals.last().unwrap() >= 9,
        "all back within the window: {arrivals:?}"
    );
    assert!(
        endpoint_view(&api, ep_id).await["throttle"].is_null(),
        "the throttle is over"
    );
}

async fn cap_of(api: &Api, id: &str) -> i64 {
    endpoint_view(api, id).await["in_flight_cap"]
        .as_i64()
        .unwrap()
}

/// Waits until the gauge `name` in /metrics reads `want`: the queue counts
/// are read from the database at most once a second.
async fn gauge_reaches(api: &Api, name: &str, want: f64) {
    let mut last = String::new();
    for _ in 0..100 {
        last = reqwest::get(api.app.url("/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let now: Option<f64> = last
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok());
        if now == Some(want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} never read {want} in /metrics:\n{last}");
}

async fn the_in_flight_cap_halves_on_overload_and_grows_back(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    // Requests overlap, so a batch is in flight together.
    rx.delay(Duration::from_millis(100));
    let ep = api.endpoint_with(&rx, json!({ "max_in_flight": 8 })).await;
    let ep_id = ep["id"].as_str().unwrap();
    for i in 0..40 {
        api.send(json!({ "type": "t", "payload": {"i": i} })).await;
    }
    rx.script(&[503]);
    assert_eq!(api.tick().await, 8);
    assert_eq!(rx.most_concurrent(), 8);
    assert_eq!(
        cap_of(&api, ep_id).await,
        4,
        "one 503 halves the cap once; the answers already in flight do not halve it again"
    );
    gauge_reaches(&api, "dakghar_endpoints_in_flight_capped", 1.0).await;

    // The 503 also held the endpoint: wait it out (at most the first
    // backoff, 60 s, plus the spread).
    api.advance(Duration::from_secs(70));
    let mut claims = Vec::new();
    while claims.len() < 4 {
        match api.tick().await {
            0 => break,
            n => claims.push(n),
        }
    }
    assert_eq!(
        claims,
        vec![4, 5, 6, 7],
        "each full window of successes grows the cap by one"
    );
    assert_eq!(cap_of(&api, ep_id).await, 8, "back at max_in_flight");
    gauge_reaches(&api, "dakghar_endpoints_in_flight_capped", 0.0).await;
}

async fn a_timeout_halves_the_in_flight_cap(store: Store) {
    let mut config = ServeConfig::for_tests();
    config.delivery.request_timeout = Duration::from_millis(300);
    let api = Api::with_config(store, config).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint_with(&rx, json!({ "max_in_flight": 6 })).await;
    let ep_id = ep["id"].as_str().unwrap();
    rx.delay(Duration::from_secs(2));
    let ev = api.send(json!({ "type": "t", "payload": {} })).await;
    assert_eq!(api.tick().await, 1);
    let d = api.delivery(&ev).await;
    assert!(
        d.last_error
            .as_deref()
            .unwrap_or_default()
            .contains("timed out"),
        "{d:?}"
    );
    assert_eq!(cap_of(&api, ep_id).await, 3);
    assert!(
        endpoint_view(&api, ep_id).await["throttle"].is_null(),
        "a timeout slows the endpoint down but is no throttle"
    );
}

async fn the_default_rate_limit_paces_endpoints_and_retries_spend_it(store: Store) {
    let mut config = ServeConfig::for_tests();
    config.delivery.default_rate_limit = Some(3);
    config.delivery.backoff.base = Duration::from_secs(1);
    let api = Api::with_config(store, config).await;
    let (paced, free) = (Receiver::start().await, Receiver::start().await);
    let a = api.endpoint(&paced).await;
    let b = api
        .endpoint_with(&free, json!({ "rate_limit_per_sec": "unlimited" }))
        .await;
    assert_eq!(a["rate_limit_per_sec"], Value::Null, "the default: {a}");
    assert_eq!(a["effective_rate_limit_per_sec"], 3);
    assert_eq!(b["rate_limit_per_sec"], "unlimited");
    assert_eq!(b["effective_rate_limit_per_sec"], Value::Null);

    // The first attempt fails and is due again within a second: it then
    // competes with the fresh ones for the same three starts a second.
    paced.script(&[500]);
    for i in 0..6 {
        api.send(json!({ "type": "t", "payload": {"i": i} })).await;
    }
    let mut per_second = Vec::new();
    for _ in 0..4 {
        let before = paced.count();
        drain(&api).await;
        per_second.push(paced.count() - before);
        api.advance(Duration::from_secs(1));
    }
    assert_eq!(
        per_second,
        vec![3, 3, 1, 0],
        "three starts a second, the retry among them"
    );
    assert_eq!(free.count(), 6, "an unlimited endpoint is not paced");

    // An endpoint's own limit, and back to the default with null.
    let id = a["id"].as_str().unwrap();
    let path = format!("/api/v1/endpoints/{id}");
    let (s, own) = api
        .call(
            Method::PATCH,
            &path,
            Some(json!({ "rate_limit_per_sec": 7 })),
        )
        .await;
    assert_eq!(
        (s, own["effective_rate_limit_per_sec"].clone()),
        (StatusCode::OK, json!(7))
    );
    let (_, back) = api
        .call(
            Method::PATCH,
            &path,
            Some(json!({ "rate_limit_per_sec": null })),
        )
        .await;
    assert_eq!(back["effective_rate_limit_per_sec"], 3);
    for bad in [json!(0), json!(10_001), json!("lots")] {
        let (s, out) = api
            .call(
                Method::PATCH,
                &path,
                Some(json!({ "rate_limit_per_sec": bad })),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {out}");
    }
}

async fn the_per_host_cap_bounds_two_accounts_endpoints_on_one_receiver(store: Store) {
    let mut config = ServeConfig::for_tests();
    config.delivery.max_in_flight_per_host = Some(2);
    let api = Api::with_config(store, config).await;
    let other_key = Api::key_for(&api.app, "other").await;
    let shared = Receiver::start().await;
    shared.delay(Duration::from_millis(150));
    let elsewhere = Receiver::start().await;
    elsewhere.delay(Duration::from_millis(150));
    for (key, url) in [
        (&api.key, format!("{}/a", shared.url)),
        (&other_key, format!("{}/b", shared.url)),
        (&api.key, elsewhere.url.clone()),
    ] {
        let (s, ep) = api
            .call_as(
                key,
                Method::POST,
                "/api/v1/endpoints",
                Some(json!({ "url": url, "max_in_flight": 5 })),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{ep}");
    }
    for i in 0..5 {
        api.send(json!({ "type": "t", "payload": {"i": i} })).await;
        let (s, _) = api
            .call_as(
                &other_key,
                Method::POST,
                "/api/v1/events",
                Some(json!({ "type": "t", "payload": {"i": i} })),
            )
            .await;
        assert_eq!(s, StatusCode::ACCEPTED);
    }
    assert_eq!(
        api.tick().await,
        2 + 2,
        "two to the shared host, two to the other one"
    );
    drain(&api).await;
    assert_eq!(shared.count(), 10, "both accounts' deliveries arrive");
    assert_eq!(
        shared.most_concurrent(),
        2,
        "never more than the host's cap"
    );
    assert_eq!(elsewhere.count(), 5);
    assert_eq!(
        elsewhere.most_concurrent(),
        2,
        "another host has a cap of its own, not a share of this one"
    );
}

async fn an_endpoints_retry_policy_decides_what_is_retried_and_when(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api
        .endpoint_with(
            &rx,
            json!({ "retry_statuses": "5xx, 429", "retry_strategy": "fixed", "max_in_flight": 1 }),
        )
        .await;
    assert_eq!(ep["effective_retry_statuses"], "429,5xx");
    assert_eq!(ep["effective_retry_strategy"], "fixed");
    let id = ep["id"].as_str().unwrap();

    // 409 is retried by default; this endpoint's list does not have it.
    rx.script(&[409]);
    let conflict = api.send(json!({ "type": "t", "payload": {} })).await;
    assert_eq!(api.tick().await, 1);
    let d = api.delivery(&conflict).await;
    assert_eq!(d.state(), Some(DeliveryState::Failed), "{d:?}");
    let detail = api.detail(conflict["id"].as_str().unwrap()).await;
    let why = detail["deliveries"][0]["attempts"][0]["explanation"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(why.contains("not retried"), "{why}");

    // A fixed wait: the same after each failure (60 s base, equal jitter).
    rx.script(&[500, 500]);
    let flaky = api.send(json!({ "type": "t", "payload": {} })).await;
    for _ in 0..2 {
        assert_eq!(api.tick().await, 1);
        let d = api.delivery(&flaky).await;
        let wait = d.next_attempt_at - api.app.clock.now().millis();
        assert!((30_000..=60_000).contains(&wait), "fixed: {wait} ms");
        api.advance(Duration::from_millis(u64::try_from(wait).unwrap()));
    }
    assert_eq!(api.tick().await, 1);
    assert_eq!(
        api.delivery(&flaky).await.state(),
        Some(DeliveryState::Delivered)
    );

    // Linear: the second wait is twice the first step.
    let path = format!("/api/v1/endpoints/{id}");
    let (s, linear) = api
        .call(
            Method::PATCH,
            &path,
            Some(json!({ "retry_strategy": "linear" })),
        )
        .await;
    assert_eq!(
        (s, linear["effective_retry_strategy"].clone()),
        (StatusCode::OK, json!("linear"))
    );
    rx.script(&[500, 500]);
    let slow = api.send(json!({ "type": "t", "payload": {} })).await;
    let mut waits = Vec::new();
    for _ in 0..2 {
        assert_eq!(api.tick().await, 1);
        let d = api.delivery(&slow).await;
        let wait = d.next_attempt_at - api.app.clock.now().millis();
        waits.push(wait);
        api.advance(Duration::from_millis(u64::try_from(wait).unwrap() + 10_000));
    }
    assert!((30_000..=60_000).contains(&waits[0]), "{waits:?}");
    assert!((60_000..=120_000).contains(&waits[1]), "{waits:?}");

    // Back to the installation's policy, and bad values refused.
    let (_, back) = api
        .call(
            Method::PATCH,
            &path,
            Some(json!({ "retry_strategy": null, "retry_statuses": null })),
        )
        .await;
    assert_eq!(back["retry_strategy"], Value::Null);
    assert_eq!(back["effective_retry_strategy"], "exponential");
    assert_eq!(
        back["effective_retry_statuses"],
        "1xx,3xx,402,404-409,411-421,423-499,5xx"
    );
    for (field, bad, code) in [
        ("retry_statuses", "5x", "invalid_retry_statuses"),
        ("retry_statuses", "", "invalid_retry_statuses"),
        ("retry_strategy", "sometimes", "invalid_retry_strategy"),
    ] {
        let (s, out) = api
            .call(Method::PATCH, &path, Some(json!({ field: bad })))
            .await;
        assert_eq!(
            (s, out["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "{field}={bad:?}: {out}"
        );
    }
}

async fn a_paused_endpoints_backlog_expires_at_its_deadline(store: Store) {
    let api = Api::new(store).await;
    let (held, live) = (Receiver::start().await, Receiver::start().await);
    let paused = api
        .endpoint_with(&held, json!({ "event_types": ["held"] }))
        .await;
    api.endpoint_with(&live, json!({ "event_types": ["live"] }))
        .await;
    let path = format!("/api/v1/endpoints/{}/pause", paused["id"].as_str().unwrap());
    let (s, _) = api.call(Method::POST, &path, None).await;
    assert_eq!(s, StatusCode::OK);
    let early = api.send(json!({ "type": "held", "payload": {} })).await;
    api.advance(Duration::from_secs(3600));
    let late = api.send(json!({ "type": "held", "payload": {} })).await;
    let active = api.send(json!({ "type": "live", "payload": {} })).await;
    let window = api.app.engine.settings().retry_window;

    let sweep = |at| dakghar::jobs::deadlines::run_once(&api.app.store, at);
    let now = api.app.clock.now();
    assert_eq!(sweep(now).await.unwrap(), 0, "nothing is overdue yet");
    // The early one's window has passed, the late one's not yet.
    api.advance(window - Duration::from_secs(1800));
    assert_eq!(sweep(api.app.clock.now()).await.unwrap(), 1);
    let d = api.delivery(&early).await;
    assert_eq!(d.state(), Some(DeliveryState::Expired));
    assert_eq!(
        d.last_error.as_deref(),
        Some("retry window passed while paused")
    );
    assert_eq!(
        api.delivery(&late).await.state(),
        Some(DeliveryState::Pending)
    );
    assert_eq!(
        api.delivery(&active).await.state(),
        Some(DeliveryState::Pending),
        "an active endpoint's work expires when a claim reaches it, not here"
    );
    api.advance(Duration::from_secs(3600));
    assert_eq!(sweep(api.app.clock.now()).await.unwrap(), 1);
    assert_eq!(
        api.delivery(&late).await.state(),
        Some(DeliveryState::Expired)
    );
    assert_eq!(held.count(), 0, "nothing was sent to the paused endpoint");

    // Resume says what drains and what passed its window meanwhile.
    let fresh = api.send(json!({ "type": "held", "payload": {} })).await;
    let resume = path.replace("/pause", "/resume");
    let (s, resumed) = api.call(Method::POST, &resume, None).await;
    assert_eq!(s, StatusCode::OK, "{resumed}");
    assert_eq!(
        (resumed["waiting"].clone(), resumed["past_window"].clone()),
        (json!(1), json!(2)),
        "{resumed}"
    );
    assert_eq!(resumed["state"], "active");
    drain(&api).await;
    assert_eq!(held.count(), 1, "only what was still in its window is sent");
    assert_eq!(
        api.delivery(&fresh).await.state(),
        Some(DeliveryState::Delivered)
    );
}

async fn a_paused_queue_is_discarded_after_a_preview(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    let id = ep["id"].as_str().unwrap();
    let base = format!("/api/v1/endpoints/{id}");
    let discard_path = format!("{base}/queue/discard");
    let discard = |body: Value| api.call(Method::POST, &discard_path, Some(body));

    let (s, out) = discard(json!({})).await;
    assert_eq!(
        (s, out["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("conflict")),
        "an active endpoint's queue is being sent: {out}"
    );

    api.call(Method::POST, &format!("{base}/pause"), None).await;
    let mut events = Vec::new();
    for i in 0..3 {
        events.push(api.send(json!({ "type": "t", "payload": {"i": i} })).await);
    }
    let (_, preview) = api.call(Method::GET, &format!("{base}/queue"), None).await;
    assert_eq!(preview["pending"], 3);

    let (s, out) = discard(json!({ "expected": 2 })).await;
    assert_eq!(
        (s, out["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("queue_changed")),
        "{out}"
    );
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("holds 3"),
        "{out}"
    );
    assert_eq!(
        api.delivery(&events[0]).await.state(),
        Some(DeliveryState::Pending),
        "nothing discarded"
    );

    let (s, out) = discard(json!({ "expected": 3 })).await;
    assert_eq!(
        (s, out["discarded"].clone()),
        (StatusCode::OK, json!(3)),
        "{out}"
    );
    for ev in &events {
        let d = api.delivery(ev).await;
        assert_eq!(d.state(), Some(DeliveryState::Expired));
        assert_eq!(d.last_error.as_deref(), Some(dakghar::endpoints::DISCARDED));
    }
    let (_, preview) = api.call(Method::GET, &format!("{base}/queue"), None).await;
    assert_eq!(preview["pending"], 0);

    // A discarded delivery can still be resent; it goes once resumed.
    let dlv = events[0]["deliveries"][0]["id"].as_str().unwrap();
    let (s, _) = api
        .call(
            Method::POST,
            &format!("/api/v1/deliveries/{dlv}/resend"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let (_, resumed) = api
        .call(Method::POST, &format!("{base}/resume"), None)
        .await;
    assert_eq!(resumed["waiting"], 1, "{resumed}");
    drain(&api).await;
    assert_eq!(rx.count(), 1, "only the resent one went");
}

async fn a_paused_endpoints_waiting_delivery_can_be_resent_for_a_fresh_window(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    let base = format!("/api/v1/endpoints/{}", ep["id"].as_str().unwrap());
    let ev = api.send(json!({ "type": "t", "payload": {} })).await;
    let dlv = ev["deliveries"][0]["id"].as_str().unwrap().to_string();
    let resend = format!("/api/v1/deliveries/{dlv}/resend");
    let (s, out) = api.call(Method::POST, &resend, None).await;
    assert_eq!(
        s,
        StatusCode::CONFLICT,
        "an active endpoint's waiting delivery is on its way: {out}"
    );

    api.call(Method::POST, &format!("{base}/pause"), None).await;
    let before = api.delivery(&ev).await;
    api.advance(Duration::from_secs(48 * 3600));
    let (s, out) = api.call(Method::POST, &resend, None).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{out}");
    let after = api.delivery(&ev).await;
    assert_eq!(after.state(), Some(DeliveryState::Pending));
    assert_eq!(
        after.give_up_at - before.give_up_at,
        48 * 3_600_000,
        "a fresh window from the resend"
    );
    assert_eq!(rx.count(), 0, "still paused: nothing sent");
}
