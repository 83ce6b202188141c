//! Faults on our side (a stored secret the key does not open): the
//! delivery waits with backoff and the endpoint says why, the rest of the
//! batch is delivered, and nothing is claimed again in a loop.

use std::time::Duration;

use dakghar::{clock::Clock, store::DeliveryState};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::{
    api_client::Api,
    dashboard_events::customer,
    helpers::{page_html, Raw, StateOf, TestDb},
    receiver::Receiver,
};

on_both_backends_db!(a_secret_that_will_not_open_holds_its_own_deliveries_only_and_backs_off);

async fn a_secret_that_will_not_open_holds_its_own_deliveries_only_and_backs_off(db: &TestDb) {
    let api = Api::new(db.store.clone()).await;
    let ana = customer(&api.app, "Acme", "ana@acme.example").await;
    let (broken_rx, fine_rx) = (Receiver::start().await, Receiver::start().await);
    let (s, broken) = api
        .call_as(
            ana.key(),
            Method::POST,
            "/api/v1/endpoints",
            Some(json!({ "url": broken_rx.url })),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let broken_id = broken["id"].as_str().unwrap().to_string();
    let other_key = Api::key_for(&api.app, "other").await;
    let (s, _) = api
        .call_as(
            &other_key,
            Method::POST,
            "/api/v1/endpoints",
            Some(json!({ "url": fine_rx.url })),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);

    // Sealed with some other key: it will not open.
    let raw = db.raw().await;
    let stolen = format!("sealed1:{}", "QUFB".repeat(20));
    let sql = format!("UPDATE endpoints SET secret = '{stolen}' WHERE id = '{broken_id}'");
    let original: String = match &raw {
        Raw::Sqlite(c) => {
            let s = sqlx::query_scalar(&format!(
                "SELECT secret FROM endpoints WHERE id = '{broken_id}'"
            ))
            .fetch_one(c)
            .await
            .unwrap();
            sqlx::query(&sql).execute(c).await.unwrap();
            s
        }
        Raw::Postgres(c) => {
            let s = sqlx::query_scalar(&format!(
                "SELECT secret FROM endpoints WHERE id = '{broken_id}'"
            ))
            .fetch_one(c)
            .await
            .unwrap();
            sqlx::query(&sql).execute(c).await.unwrap();
            s
        }
    };

    let (s, held) = api
        .call_as(
            ana.key(),
            Method::POST,
            "/api/v1/events",
            Some(json!({ "type": "t", "payload": {} })),
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let (s, fine) = api
        .call_as(
            &other_key,
            Method::POST,
            "/api/v1/events",
            Some(json!({ "type": "t", "payload": {} })),
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED);

    // One round: the other tenant's event goes out; the held one waits.
    assert_eq!(api.tick().await, 2);
    fine_rx.wait_for(1).await;
    let fine_delivery = fine["deliveries"][0]["id"].as_str().unwrap();
    let d = api.app.store.delivery(fine_delivery).await.unwrap();
    assert_eq!(d.state(), Some(DeliveryState::Delivered));
    let d = api.delivery(&held).await;
    assert_eq!(d.state(), Some(DeliveryState::Pending));
    assert_eq!(d.attempts, 0, "no attempt counted for our fault");
    let now = api.app.clock.now().millis();
    assert_eq!(d.next_attempt_at, now + 5_000, "it waits 5 s");
    // Not claimed again meanwhile: no loop.
    assert_eq!(api.tick().await, 0);

    // The endpoint says what is wrong, in the API and on its page.
    let (_, ep) = api
        .call_as(
            ana.key(),
            Method::GET,
            &format!("/api/v1/endpoints/{broken_id}"),
            None,
        )
        .await;
    let fault = ep["fault"].as_str().unwrap_or_default();
    assert!(
        fault.contains("does not open with this secrets key"),
        "{ep}"
    );
    assert!(ep["fault_since"].is_string(), "{ep}");
    assert!(!ep.to_string().contains(&stolen), "never the stored secret");
    let page = page_html(&ana.web, &api.app.url(&format!("/endpoints/{broken_id}"))).await;
    assert!(page.contains("endpoint-fault"), "{page}");
    assert!(page.contains("a fault on our side"), "{page}");

    // Again: twice as long.
    api.advance(Duration::from_secs(5));
    assert_eq!(api.tick().await, 1);
    let d = api.delivery(&held).await;
    assert_eq!(d.next_attempt_at, api.app.clock.now().millis() + 10_000);

    // Mended: the next try sends it and the fault is gone.
    let sql = format!("UPDATE endpoints SET secret = '{original}' WHERE id = '{broken_id}'");
    match &raw {
        Raw::Sqlite(c) => drop(sqlx::query(&sql).execute(c).await.unwrap()),
        Raw::Postgres(c) => drop(sqlx::query(&sql).execute(c).await.unwrap()),
    }
    api.advance(Duration::from_secs(10));
    assert_eq!(api.tick().await, 1);
    broken_rx.wait_for(1).await;
    assert_eq!(
        api.delivery(&held).await.state(),
        Some(DeliveryState::Delivered)
    );
    let (_, ep) = api
        .call_as(
            ana.key(),
            Method::GET,
            &format!("/api/v1/endpoints/{broken_id}"),
            None,
        )
        .await;
    assert!(ep["fault"].is_null(), "{ep}");
}
