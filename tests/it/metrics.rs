//! `/metrics` in Prometheus text: the named series exist and move when
//! deliveries happen. The recorder is global to the test process, so
//! counters are compared before and after, never as absolute numbers.

use std::time::Duration;

use dakghar::store::Store;
use reqwest::StatusCode;
use serde_json::json;

use crate::{api_client::Api, receiver::Receiver};

on_both_backends!(metrics_move_when_deliveries_happen);

async fn scrape(api: &Api) -> String {
    let res = reqwest::get(api.app.url("/metrics")).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    res.text().await.unwrap()
}

/// The value of one series (name with its labels, as rendered), 0 if absent.
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

async fn metrics_move_when_deliveries_happen(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    let before = scrape(&api).await;

    rx.script(&[500, 400]);
    api.send(json!({ "type": "t", "payload": {} })).await; // 500, then 200
    api.send(json!({ "type": "t", "payload": {} })).await; // 400
    api.tick().await;
    api.advance(Duration::from_secs(120));
    api.tick().await;
    // Three waiting for a paused endpoint.
    let (s, _) = api
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/endpoints/{}/pause", ep["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    for _ in 0..3 {
        api.send(json!({ "type": "t", "payload": {} })).await;
    }
    let after = scrape(&api).await;

    let moved = |series: &str| value(&after, series) - value(&before, series);
    assert!(
        moved(r#"dakghar_attempts_total{outcome="transient",status_class="5xx"}"#) >= 1.0,
        "{after}"
    );
    assert!(moved(r#"dakghar_attempts_total{outcome="permanent",status_class="4xx"}"#) >= 1.0);
    assert!(moved(r#"dakghar_attempts_total{outcome="delivered",status_class="2xx"}"#) >= 1.0);
    assert!(moved("dakghar_retries_total") >= 1.0);
    assert!(moved("dakghar_delivered_after_retry_total") >= 1.0);
    assert!(moved(r#"dakghar_dead_lettered_total{reason="failed"}"#) >= 1.0);
    assert!(moved("dakghar_request_seconds_count") >= 3.0);
    assert!(moved("dakghar_attempt_delay_seconds_count") >= 3.0);
    assert!(moved("dakghar_delivery_delay_seconds_count") >= 1.0);
    assert!(after.contains(r#"dakghar_request_seconds_bucket{le="0.005"}"#));
    // The steps of a delivery's path, for finding where latency goes.
    assert!(moved("dakghar_db_ingest_seconds_count") >= 5.0);
    assert!(moved("dakghar_db_claim_seconds_count") >= 2.0);
    assert!(moved("dakghar_db_record_seconds_count") >= 3.0);
    assert!(after.contains(r#"dakghar_db_claim_seconds_bucket{le="0.0005"}"#));
    assert_eq!(
        value(&after, r#"dakghar_queue_depth{state="pending"}"#),
        3.0,
        "read from this database at scrape time"
    );
    assert_eq!(
        value(&after, r#"dakghar_queue_depth{state="in_flight"}"#),
        0.0
    );
    assert!(after.contains("dakghar_circuits_open "));
    assert!(after.contains("# HELP dakghar_dead_lettered_total"));
}
