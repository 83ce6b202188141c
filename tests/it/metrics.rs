//! `/metrics` in Prometheus text: the named series exist and move when
//! deliveries happen. The recorder of counters and histograms is global
//! to the test process, so they are compared before and after, never as
//! absolute numbers; the queue gauges are each server's own.

use std::time::Duration;

use dakghar::store::Store;
use reqwest::StatusCode;
use serde_json::json;

use crate::{api_client::Api, receiver::Receiver};

on_both_backends!(
    metrics_move_when_deliveries_happen,
    metrics_on_their_own_address_and_the_queue_read_at_most_once_a_second,
);

async fn scrape(api: &Api) -> String {
    scrape_at(&api.app.url("/metrics")).await
}

pub(crate) async fn scrape_at(url: &str) -> String {
    let res = reqwest::get(url).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    res.text().await.unwrap()
}

/// The value of one series (name with its labels, as rendered), 0 if absent.
pub(crate) fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

async fn metrics_move_when_deliveries_happen(store: Store) {
    let store_is_sqlite = store.backend() == dakghar::store::Backend::Sqlite;
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
    // The queue counts are read at most once a second: scrape until they
    // show what this test left waiting.
    let pending = r#"dakghar_queue_depth{state="pending"}"#;
    let mut after = scrape(&api).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while value(&after, pending) != 3.0 {
        assert!(std::time::Instant::now() < deadline, "{after}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = scrape(&api).await;
    }

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
    // Each attempt above started from a claim (`tick`): no workers run.
    assert!(moved(r#"dakghar_leased_total{by="claim"}"#) >= 3.0);
    assert!(moved("dakghar_db_record_seconds_count") >= 3.0);
    assert!(after.contains(r#"dakghar_db_claim_seconds_bucket{le="0.0005"}"#));
    // SQLite's one write connection, held by the ingests, claims and
    // results above. A Postgres store never records it, but the recorder
    // is the test process's and SQLite tests run meanwhile: the Postgres
    // variant can ask neither that it moved nor that it stayed at 0.
    if store_is_sqlite {
        assert!(
            moved("dakghar_db_writer_hold_seconds_count") >= 5.0,
            "{after}"
        );
        assert!(moved("dakghar_db_writer_hold_seconds_sum") > 0.0, "{after}");
    }
    assert!(after.contains("# HELP dakghar_db_writer_hold_seconds"));
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

/// `--metrics-listen`: /metrics answers on its own address and no longer
/// beside the API; and the queue counts it reads from the database are a
/// second old at most, however often it is asked.
async fn metrics_on_their_own_address_and_the_queue_read_at_most_once_a_second(store: Store) {
    let mut config = dakghar::config::ServeConfig::for_tests();
    config.metrics_listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    let api = Api::with_config(store, config).await;
    let res = reqwest::get(api.app.url("/metrics")).await.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND, "not beside the API");
    let metrics = format!("{}/metrics", api.app.metrics_base.as_deref().unwrap());
    let pending = r#"dakghar_queue_depth{state="pending"}"#;
    // The count is read during this first scrape, so no later than now.
    let first_at = std::time::Instant::now();
    let first = scrape_at(&metrics).await;
    assert!(first.contains("# HELP dakghar_attempts_total"));
    let before = value(&first, pending);

    assert!(first.contains(pending), "{first}");
    assert_eq!(before, 0.0, "this server's own database: {first}");

    // Events wait (this test's workers only run when it ticks them).
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    for _ in 0..2 {
        api.send(json!({ "type": "t", "payload": {} })).await;
    }
    // Within the second the first reading is fresh for, a scrape shows it
    // again; the check needs the sends done by then, which they are by far.
    let asked_at = first_at.elapsed();
    let cached = value(&scrape_at(&metrics).await, pending);
    assert!(
        asked_at < Duration::from_millis(900),
        "sending two events took {asked_at:?}: too slow to see the cached count"
    );
    assert_eq!(
        cached, before,
        "read again {asked_at:?} after the first reading"
    );
    let mut scrapes = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while value(&scrape_at(&metrics).await, pending) != 2.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the count never showed the new events"
        );
        scrapes += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        first_at.elapsed() >= Duration::from_secs(1),
        "the new count showed {:?} after the first reading ({scrapes} scrapes)",
        first_at.elapsed()
    );
}
