//! What one account may take of an installation it shares: endpoints, an
//! ingest rate, and the writer's time when it deletes a great deal.

use std::time::{Duration, Instant};

use dakghar::{config::ServeConfig, store::Store};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::{
    api_client::Api,
    helpers::{Raw, TestDb},
    receiver::Receiver,
};

on_both_backends_db!(deleting_an_endpoint_with_many_deliveries_leaves_other_tenants_working);
on_both_backends!(
    an_account_has_at_most_its_endpoints_even_when_it_asks_for_more_at_once,
    over_its_ingest_rate_an_account_gets_429_and_the_others_go_on,
);

/// `n` events to the endpoint, each with a delivery and two attempts,
/// written straight into the tables (as the bench seeds its million).
async fn seed_deliveries(store: &Store, account: &str, endpoint: &str, n: i64, sqlite: bool) {
    let (with, from, blob) = if sqlite {
        (
            format!(
                "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {n}) "
            ),
            "s".to_string(),
            "CAST('{}' AS BLOB)",
        )
    } else {
        (
            String::new(),
            format!("generate_series(1, {n}) AS s(n)"),
            "convert_to('{}', 'UTF8')",
        )
    };
    let ev = "'evt_big_' || n";
    store
        .execute_script(&format!(
            "{with}INSERT INTO events (account_id, id, event_type, payload, created_at) \
             SELECT '{account}', {ev}, 't', {blob}, n FROM {from}"
        ))
        .await
        .unwrap();
    store
        .execute_script(&format!(
            "{with}INSERT INTO deliveries (id, account_id, event_id, endpoint_id, state, attempts, \
               attempt_seq, next_attempt_at, give_up_at, last_status, finished_at, created_at, \
               updated_at) \
             SELECT 'dlv_big_' || n, '{account}', {ev}, '{endpoint}', 'failed', 2, 2, n, n, 500, \
               n, n, n FROM {from}"
        ))
        .await
        .unwrap();
    store
        .execute_script(&format!(
            "INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, request_headers, \
               response_status, response_headers, response_body, error, classification, endpoint_id) \
             SELECT id, a.k, created_at, 5, '[]', 500, '[]', NULL, NULL, 'retry', endpoint_id \
             FROM deliveries CROSS JOIN (SELECT 1 AS k UNION ALL SELECT 2) a \
             WHERE endpoint_id = '{endpoint}'"
        ))
        .await
        .unwrap();
}

/// Deleting an endpoint deleted its deliveries by cascade in one
/// statement: with a million of them SQLite's writer was held past its
/// busy timeout and every other tenant got 503s. Now they go in small
/// batches, and other tenants' writes go on between them.
async fn deleting_an_endpoint_with_many_deliveries_leaves_other_tenants_working(db: &TestDb) {
    const N: i64 = 60_000;
    let api = Api::with_config(db.store.clone(), ServeConfig::for_tests()).await;
    let rx = Receiver::start().await;
    let big = api.endpoint(&rx).await;
    let big_id = big["id"].as_str().unwrap().to_string();
    let raw = db.raw().await;
    let scalar = |sql: String| {
        let raw = &raw;
        async move {
            match raw {
                Raw::Sqlite(c) => sqlx::query_scalar::<_, String>(&sql)
                    .fetch_one(c)
                    .await
                    .unwrap(),
                Raw::Postgres(c) => sqlx::query_scalar::<_, String>(&sql)
                    .fetch_one(c)
                    .await
                    .unwrap(),
            }
        }
    };
    let account = scalar(format!(
        "SELECT account_id FROM endpoints WHERE id = '{big_id}'"
    ))
    .await;
    seed_deliveries(
        &api.app.store,
        &account,
        &big_id,
        N,
        matches!(raw, Raw::Sqlite(_)),
    )
    .await;

    // Another tenant, sending events all the while.
    let other_key = Api::key_for(&api.app, "other").await;
    let other_rx = Receiver::start().await;
    let (s, _) = api
        .call_as(
            &other_key,
            Method::POST,
            "/api/v1/endpoints",
            Some(json!({ "url": other_rx.url })),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let deleting = {
        let (http, url, key) = (
            api.http.clone(),
            api.app.url(&format!("/api/v1/endpoints/{big_id}")),
            api.key.clone(),
        );
        tokio::spawn(async move {
            let started = Instant::now();
            let res = http.delete(url).bearer_auth(key).send().await.unwrap();
            (res.status(), started.elapsed())
        })
    };
    let mut slowest = Duration::ZERO;
    let mut sent = 0;
    while !deleting.is_finished() {
        let started = Instant::now();
        let (s, body) = api
            .call_as(
                &other_key,
                Method::POST,
                "/api/v1/events",
                Some(json!({ "type": "t", "payload": {} })),
            )
            .await;
        assert_eq!(
            s,
            StatusCode::ACCEPTED,
            "another tenant during the deletion: {body}"
        );
        slowest = slowest.max(started.elapsed());
        sent += 1;
    }
    let (status, took) = deleting.await.unwrap();
    assert_eq!(status, StatusCode::NO_CONTENT);
    let count = |table: &str| {
        let sql = format!(
            "SELECT CAST(count(*) AS TEXT) FROM {table} WHERE {}",
            if table == "attempts" {
                "delivery_id LIKE 'dlv_big_%'".to_string()
            } else {
                format!("endpoint_id = '{big_id}'")
            }
        );
        scalar(sql)
    };
    assert_eq!(count("deliveries").await, "0");
    assert_eq!(count("attempts").await, "0");
    eprintln!("deleted {N} deliveries in {took:?}; {sent} events from another tenant meanwhile, the slowest {slowest:?}");
    assert!(sent > 0);
    assert!(
        slowest < Duration::from_secs(1),
        "another tenant waited {slowest:?} for one event"
    );
}

async fn an_account_has_at_most_its_endpoints_even_when_it_asks_for_more_at_once(store: Store) {
    let mut config = ServeConfig::for_tests();
    config.max_endpoints_per_account = 3;
    let api = Api::with_config(store, config).await;
    let rx = Receiver::start().await;
    let asks: Vec<_> = (0..10)
        .map(|i| {
            let (http, url, key) = (
                api.http.clone(),
                api.app.url("/api/v1/endpoints"),
                api.key.clone(),
            );
            let body = json!({ "url": format!("{}?n={i}", rx.url) });
            tokio::spawn(async move {
                let res = http
                    .post(url)
                    .bearer_auth(key)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                let status = res.status();
                (status, res.json::<serde_json::Value>().await.unwrap())
            })
        })
        .collect();
    let mut created = 0;
    for ask in asks {
        let (status, body) = ask.await.unwrap();
        match status {
            StatusCode::CREATED => created += 1,
            StatusCode::CONFLICT => {
                assert_eq!(body["error"]["code"], "endpoint_limit", "{body}");
                assert!(body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("3 endpoints"));
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(created, 3);
    let (_, list) = api.call(Method::GET, "/api/v1/endpoints", None).await;
    let list = list["data"].as_array().unwrap().clone();
    assert_eq!(list.len(), 3);
    // Another account has its own three; a deletion makes room.
    let other = Api::key_for(&api.app, "other").await;
    let (s, _) = api
        .call_as(
            &other,
            Method::POST,
            "/api/v1/endpoints",
            Some(json!({ "url": rx.url })),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let first = list[0]["id"].as_str().unwrap();
    let (s, _) = api
        .call(Method::DELETE, &format!("/api/v1/endpoints/{first}"), None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, body) = api
        .call(
            Method::POST,
            "/api/v1/endpoints",
            Some(json!({ "url": rx.url })),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
}

async fn over_its_ingest_rate_an_account_gets_429_and_the_others_go_on(store: Store) {
    let mut config = ServeConfig::for_tests();
    config.ingest_rate_limit = Some(5);
    let api = Api::with_config(store, config).await;
    let other = Api::key_for(&api.app, "other").await;
    let send = |key: String| {
        let (http, url) = (api.http.clone(), api.app.url("/api/v1/events"));
        async move {
            http.post(url)
                .bearer_auth(key)
                .json(&json!({ "type": "t", "payload": {} }))
                .send()
                .await
                .unwrap()
        }
    };
    // The test clock stands still: all of these fall in one second.
    for _ in 0..5 {
        assert_eq!(send(api.key.clone()).await.status(), StatusCode::ACCEPTED);
    }
    let over = send(api.key.clone()).await;
    assert_eq!(over.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = over.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=1).contains(&wait), "{wait}");
    let body: serde_json::Value = over.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("5 events per second"),
        "{body}"
    );
    assert_eq!(
        send(other.clone()).await.status(),
        StatusCode::ACCEPTED,
        "its own budget"
    );
    api.app.clock.advance(Duration::from_secs(1));
    assert_eq!(
        send(api.key.clone()).await.status(),
        StatusCode::ACCEPTED,
        "a new second"
    );
}
