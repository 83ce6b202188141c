//! Notifications, API keys and the contract page's server functions.

use std::time::Duration;

use dakghar::{clock::Clock, config::ServeConfig, store::Store};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::{
    dashboard_events::{customer, tick_until_idle},
    helpers::{page_html, spawn_app_with},
    receiver::Receiver,
};

on_both_backends!(
    notifications_show_the_accounts_alerts_only,
    api_keys_are_shown_once_work_and_can_be_revoked,
    the_contract_is_written_from_the_live_configuration,
);

async fn notifications_show_the_accounts_alerts_only(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let bob = customer(&app, "Bobco", "bob@bobco.example").await;
    let (_, none) = ana.call(&app, "notifications", &[]).await;
    assert_eq!(none, json!([]));

    let rx = Receiver::start().await;
    rx.script(&[410]);
    let ep = ana
        .api(&app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    ana.api(
        &app,
        "/api/v1/events",
        json!({ "type": "t", "payload": {} }),
    )
    .await;
    tick_until_idle(&app).await;

    let (status, list) = ana.call(&app, "notifications", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let n = &list[0];
    assert_eq!(n["kind"], "endpoint_paused");
    assert!(n["subject"].as_str().unwrap().contains(&rx.url));
    assert!(n["body"].as_str().unwrap().contains("410 Gone"));
    assert_eq!(n["endpoint_id"], ep["id"]);
    let (_, bobs) = bob.call(&app, "notifications", &[]).await;
    assert_eq!(bobs, json!([]), "another account's alerts stay private");
}

async fn api_keys_are_shown_once_work_and_can_be_revoked(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let bob = customer(&app, "Bobco", "bob@bobco.example").await;

    let (status, body) = ana
        .call(&app, "api_key_create", &[("name", "line one\nline two")])
        .await;
    assert!(body.to_string().contains("one line"), "{status}: {body}");
    let (status, key) = ana
        .call(&app, "api_key_create", &[("name", "  Billing producer ")])
        .await;
    assert_eq!(status, StatusCode::OK);
    let key = key.as_str().unwrap().to_string();
    let use_key = |key: String| {
        let url = app.url("/api/v1/endpoints");
        async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(
        use_key(key.clone()).await,
        StatusCode::OK,
        "the new key works"
    );

    let (_, keys) = ana.call(&app, "api_keys", &[]).await;
    let keys = keys.as_array().unwrap();
    assert_eq!(keys.len(), 2, "the key from sign-up and the new one");
    let listed = keys
        .iter()
        .find(|k| key.starts_with(k["prefix"].as_str().unwrap()))
        .unwrap();
    assert!(
        !Value::Array(keys.clone()).to_string().contains(&key),
        "listed by prefix only"
    );
    let id = listed["id"].as_str().unwrap();
    assert_eq!(listed["name"], "Billing producer");
    let used = listed["last_used_at"].as_i64().expect("used once");
    assert_eq!(used, app.clock.now().millis());

    // Uses are recorded to the minute: one a second later is not written,
    // one a minute later is.
    app.clock.advance(Duration::from_secs(1));
    assert_eq!(use_key(key.clone()).await, StatusCode::OK);
    let last_used = || async {
        let (_, keys) = ana.call(&app, "api_keys", &[]).await;
        keys.as_array()
            .unwrap()
            .iter()
            .find(|k| k["id"] == id)
            .unwrap()["last_used_at"]
            .as_i64()
    };
    assert_eq!(last_used().await, Some(used));
    app.clock.advance(Duration::from_secs(60));
    assert_eq!(use_key(key.clone()).await, StatusCode::OK);
    assert_eq!(last_used().await, Some(app.clock.now().millis()));
    let html = page_html(&ana.web, &app.url("/api-keys")).await;
    assert!(
        html.contains("Billing producer") && html.contains("Last used"),
        "{html}"
    );

    let (status, body) = bob.call(&app, "api_key_revoke", &[("id", id)]).await;
    assert!(!status.is_success());
    assert!(body.to_string().contains("NotFound"), "{body}");
    assert_eq!(
        use_key(key.clone()).await,
        StatusCode::OK,
        "bob changed nothing"
    );

    let (status, _) = ana.call(&app, "api_key_revoke", &[("id", id)]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(use_key(key).await, StatusCode::UNAUTHORIZED);
    let (_, keys) = ana.call(&app, "api_keys", &[]).await;
    let revoked = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id)
        .unwrap();
    assert!(revoked["revoked_at"].as_i64().is_some());
}

async fn the_contract_is_written_from_the_live_configuration(store: Store) {
    let mut config = ServeConfig::for_tests();
    config.delivery.max_attempts = 5;
    config.delivery.retry_window = Duration::from_secs(24 * 3600);
    config.delivery.backoff.base = Duration::from_secs(30);
    let app = spawn_app_with(store, config).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;

    let (status, c) = ana.call(&app, "contract", &[]).await;
    assert_eq!(status, StatusCode::OK, "{c}");
    assert_eq!(c["max_attempts"], 5);
    assert_eq!(c["retry_window"], "1day");
    assert_eq!(c["jitter"], "equal");
    assert_eq!(
        c["schedule"],
        json!([
            [2, "15s", "30s"],
            [3, "30s", "1m"],
            [4, "1m", "2m"],
            [5, "2m", "4m"]
        ])
    );
}
