//! The SSRF guard: internal addresses are refused when an endpoint is saved
//! and again on the address a send actually resolves to; loopback is open
//! only to the allow-list.

use std::time::Duration;

use dakghar::{
    clock::Clock,
    config::ServeConfig,
    delivery::target_policy::TargetPolicy,
    store::{DeliveryState, NewEvent, Store},
};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::{
    dashboard_events::{customer, tick_until_idle, Customer},
    helpers::{new_endpoint, spawn_app_with, TestApp},
    receiver::Receiver,
};

on_both_backends!(
    internal_targets_are_refused_when_saved_in_every_form,
    bad_urls_are_refused_with_a_reason,
    a_name_resolving_to_loopback_is_blocked_at_send_and_nothing_is_sent,
    loopback_works_only_with_the_allow_list,
);

fn strict() -> ServeConfig {
    let mut config = ServeConfig::for_tests();
    config.delivery.targets = TargetPolicy::default();
    config
}

async fn add_endpoint(app: &TestApp, who: &Customer, url: &str) -> (StatusCode, Value) {
    let res = reqwest::Client::new()
        .post(app.url("/api/v1/endpoints"))
        .bearer_auth(who.key())
        .json(&json!({ "url": url }))
        .send()
        .await
        .unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn internal_targets_are_refused_when_saved_in_every_form(store: Store) {
    let app = spawn_app_with(store, strict()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    for url in [
        "http://127.0.0.1:9000/hook",
        "http://127.1/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://localhost/",
        "http://10.0.0.5/",
        "http://192.168.0.10/",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.64.1.1/",
        "http://0.0.0.0/",
        "http://224.0.0.251/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[fd00:ec2::254]/",
        "http://[fe80::1]/",
    ] {
        let (status, body) = add_endpoint(&app, &ana, url).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}");
        assert_eq!(body["error"]["code"], "blocked_url", "{url}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("address"), "{url}: {message}");
    }
    let saved = app
        .store
        .list_endpoints(&ana.seeded.account.id)
        .await
        .unwrap();
    assert!(saved.is_empty(), "nothing refused was saved");
    // A public address is accepted: saving sends nothing.
    let (status, _) = add_endpoint(&app, &ana, "https://93.184.216.34/hook").await;
    assert_eq!(status, StatusCode::CREATED);
}

async fn bad_urls_are_refused_with_a_reason(store: Store) {
    let app = spawn_app_with(store, strict()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let long = format!("https://example.com/{}", "a".repeat(10_000));
    for (url, says) in [
        ("ftp://example.com/", "scheme"),
        ("javascript:alert(1)", "scheme"),
        ("https://user:pw@example.com/", "user name or password"),
        ("http://", "not a valid URL"),
        ("", "required"),
        (long.as_str(), "longer than"),
    ] {
        let (status, body) = add_endpoint(&app, &ana, url).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}");
        assert_eq!(body["error"]["code"], "invalid_url", "{url}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{url}: {message}");
    }
}

/// As if the name had resolved to a public address when it was saved and
/// to loopback now (DNS rebinding): the send resolves, refuses, records the
/// attempt as blocked and never connects. A literal loopback URL saved
/// before the guard existed is refused the same way.
async fn a_name_resolving_to_loopback_is_blocked_at_send_and_nothing_is_sent(store: Store) {
    let app = spawn_app_with(store, strict()).await;
    let rx = Receiver::start().await;
    let port = url::Url::parse(&rx.url).unwrap().port().unwrap();
    let now = app.clock.now();
    let account = app.store.create_account("acme", now).await.unwrap();
    for (i, url) in [format!("http://localhost:{port}/hook"), rx.url.clone()]
        .into_iter()
        .enumerate()
    {
        let endpoint = app
            .store
            .create_endpoint(new_endpoint(&account.id, &url, &[&format!("t{i}")]), now)
            .await
            .unwrap();
        let event = NewEvent {
            account_id: account.id.clone(),
            id: format!("evt_{i}"),
            event_type: format!("t{i}"),
            payload: b"{}".to_vec(),
        };
        let inserted = app
            .store
            .insert_event(event, now, now.plus(Duration::from_secs(3600)))
            .await
            .unwrap();
        tick_until_idle(&app).await;
        let delivery = app
            .store
            .delivery(&inserted.deliveries[0].id)
            .await
            .unwrap();
        assert_eq!(delivery.endpoint_id, endpoint.id);
        assert_eq!(
            delivery.state,
            DeliveryState::Failed.as_str(),
            "not retried"
        );
        let attempts = app.store.attempts_of_delivery(&delivery.id).await.unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].classification, "blocked");
        assert_eq!(attempts[0].response_status, None);
        let error = attempts[0].error.as_deref().unwrap_or_default();
        assert!(error.starts_with("blocked: "), "{error}");
        assert!(error.contains("loopback"), "{error}");
    }
    assert_eq!(rx.count(), 0, "nothing reached the receiver");
}

async fn loopback_works_only_with_the_allow_list(store: Store) {
    // ServeConfig::for_tests allows 127.0.0.1/32, as --allow-subnets would.
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let rx = Receiver::start().await;
    let (status, body) = add_endpoint(&app, &ana, &rx.url).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let port = url::Url::parse(&rx.url).unwrap().port().unwrap();
    let (status, body) = add_endpoint(&app, &ana, &format!("http://127.0.0.2:{port}/")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "outside the list: {body}");
    ana.api(
        &app,
        "/api/v1/events",
        json!({ "id": "evt_1", "type": "t", "payload": {} }),
    )
    .await;
    tick_until_idle(&app).await;
    assert_eq!(rx.count(), 1, "delivered through the allow-list");
}
