//! The endpoints pages' server functions: create with validation, health
//! numbers that match what the receiver saw, pause/resume, secrets, test
//! events, delete; all scoped to the signed-in account.

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
    endpoints_are_created_with_validation_and_listed,
    health_numbers_match_what_the_receiver_saw,
    pause_queues_and_resume_drains,
    secrets_are_revealed_on_request_and_rotated,
    a_test_event_goes_to_that_endpoint_only,
    another_account_cannot_see_or_change_an_endpoint,
    the_page_shows_a_throttle_and_a_lowered_cap,
    a_paused_queue_is_discarded_only_at_the_count_shown,
    an_endpoint_is_edited_with_an_error_on_each_wrong_field,
    a_customer_recovers_what_failed_since_a_time,
);

fn create_form<'a>(url: &'a str, types: &'a str) -> Vec<(&'static str, &'a str)> {
    vec![
        ("form[url]", url),
        ("form[description]", "Billing"),
        ("form[event_types]", types),
        ("form[rate_limit_per_sec]", ""),
        ("form[max_in_flight]", "5"),
    ]
}

async fn endpoints_are_created_with_validation_and_listed(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;

    for (url, expect) in [
        ("ftp://example.com/x", "http or https"),
        ("https://user:pw@example.com/", "user"),
        ("not a url", "URL"),
    ] {
        let (status, body) = ana
            .call(&app, "endpoint_create", &create_form(url, ""))
            .await;
        assert!(!status.is_success(), "{url}");
        assert!(body.to_string().contains(expect), "{url}: {body}");
    }
    let mut bad_limit = create_form("https://example.com/hook", "");
    bad_limit[4] = ("form[max_in_flight]", "lots");
    let (_, body) = ana.call(&app, "endpoint_create", &bad_limit).await;
    assert!(body.to_string().contains("whole number"), "{body}");
    let (_, listed) = ana.call(&app, "endpoints", &[]).await;
    assert_eq!(listed, json!([]), "nothing half-created");

    let (status, id) = ana
        .call(
            &app,
            "endpoint_create",
            &create_form("https://example.com/hook", "invoice.paid, invoice.failed"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{id}");
    let id = id.as_str().unwrap().to_string();
    let (_, listed) = ana.call(&app, "endpoints", &[]).await;
    let e = &listed[0];
    assert_eq!(e["id"], id.as_str());
    assert_eq!(e["url"], "https://example.com/hook");
    assert_eq!(e["event_types"], json!(["invoice.paid", "invoice.failed"]));
    assert_eq!(e["condition"], "Healthy");
    assert_eq!(e["last_attempt"], Value::Null);
    let endpoint = app
        .store
        .endpoint(&ana.seeded.account.id, &id)
        .await
        .unwrap();
    assert_eq!(endpoint.max_in_flight, 5);

    let (status, _) = ana.call(&app, "endpoint_delete", &[("id", &id)]).await;
    assert_eq!(status, StatusCode::OK);
    let (_, listed) = ana.call(&app, "endpoints", &[]).await;
    assert_eq!(listed, json!([]));
}

async fn health_numbers_match_what_the_receiver_saw(store: Store) {
    // The test jumps a day ahead and stays signed in across it.
    let long_sessions = dakghar::config::SessionSettings {
        idle: Duration::from_secs(30 * 24 * 3600),
        max_age: Duration::from_secs(30 * 24 * 3600),
    };
    let config = ServeConfig {
        sessions: long_sessions,
        ..ServeConfig::for_tests()
    };
    let app = spawn_app_with(store, config).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let rx = Receiver::start().await;
    let ep = ana
        .api(&app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    let id = ep["id"].as_str().unwrap();
    rx.script(&[500, 500, 404]);
    for n in 0..5 {
        ana.api(
            &app,
            "/api/v1/events",
            json!({ "id": format!("evt_{n}"), "type": "t", "payload": {} }),
        )
        .await;
    }
    tick_until_idle(&app).await;
    app.clock.advance(Duration::from_secs(3600));
    tick_until_idle(&app).await;
    assert_eq!(rx.count(), 8, "five first tries, three retries");

    let (status, d) = ana.call(&app, "endpoint", &[("id", id)]).await;
    assert_eq!(status, StatusCode::OK, "{d}");
    assert_eq!(d["summary"]["attempts_24h"], 8);
    assert_eq!(d["summary"]["delivered_24h"], 5);
    assert_eq!(d["attempts_7d"], 8);
    assert_eq!(
        d["summary"]["condition"], "Healthy",
        "the last attempt succeeded"
    );
    let hourly = d["hourly"].as_array().unwrap();
    assert_eq!(hourly.len(), 24);
    let (ok, bad) = hourly.iter().fold((0, 0), |(o, b), h| {
        (o + h[1].as_i64().unwrap(), b + h[2].as_i64().unwrap())
    });
    assert_eq!(
        (ok, bad),
        (5, 3),
        "the chart adds up to the receiver's count"
    );
    assert_eq!(
        hourly[23][1], 3,
        "the retries an hour later are in the current hour"
    );
    // Latency per hour: a p50 and a p95 exactly where attempts were, the
    // p95 never under the p50; of eight attempts the day's p95 is the
    // slowest, so no hour's is above it.
    let latency = d["latency_hourly"].as_array().unwrap();
    assert_eq!(latency.len(), 24);
    for (hour, l) in hourly.iter().zip(latency) {
        assert_eq!(hour[0], l["start"]);
        let attempts = hour[1].as_i64().unwrap() + hour[2].as_i64().unwrap();
        match (l["p50_ms"].as_i64(), l["p95_ms"].as_i64()) {
            (Some(p50), Some(p95)) => assert!(attempts > 0 && p50 <= p95, "{l}"),
            (None, None) => assert_eq!(attempts, 0, "{l}"),
            _ => panic!("one percentile without the other: {l}"),
        }
    }
    let slowest = latency.iter().filter_map(|l| l["p95_ms"].as_i64()).max();
    assert!(slowest <= d["p95_ms_24h"].as_i64(), "{slowest:?}");
    let daily = d["latency_daily"].as_array().unwrap();
    assert_eq!(daily.len(), 7);
    assert!(daily[6]["p95_ms"].as_i64().is_some(), "today has attempts");
    let html = page_html(&ana.web, &app.url(&format!("/endpoints/{id}"))).await;
    for testid in [
        "latency-hourly",
        "latency-daily",
        "chart-data",
        "daily-data",
    ] {
        assert!(
            html.contains(&format!(r#"data-testid="{testid}""#)),
            "{testid}"
        );
    }
    let errors = d["last_errors"].as_array().unwrap();
    assert_eq!(errors.len(), 3);
    assert!(errors
        .iter()
        .any(|e| e["status"] == 404 && e["explanation"].as_str().unwrap().contains("ambiguous")));
    assert!(errors[0]["event_id"].as_str().unwrap().starts_with("evt_"));
    assert!(d["avg_ms_24h"].as_i64().is_some() && d["p95_ms_24h"].as_i64().is_some());
    assert_eq!(
        (d["pending"].as_i64(), d["in_flight"].as_i64()),
        (Some(0), Some(0))
    );

    let via_api: Value = reqwest::Client::new()
        .get(app.url(&format!("/api/v1/endpoints/{id}/health")))
        .bearer_auth(ana.key())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(via_api["attempts_24h"], 8, "{via_api}");
    assert_eq!(via_api["success_rate_24h"], 5.0 / 8.0);
    assert_eq!(via_api["p95_latency_ms_24h"], d["p95_ms_24h"]);
    assert_eq!(via_api["hourly"].as_array().unwrap().len(), 24);

    let (_, listed) = ana.call(&app, "endpoints", &[]).await;
    assert_eq!(listed[0]["attempts_24h"], 8);
    assert_eq!(listed[0]["delivered_24h"], 5);
    assert_eq!(listed[0]["last_attempt"]["status"], 200);

    // A day later the 24-hour numbers are empty and the week still counts.
    app.clock.advance(Duration::from_secs(25 * 3600));
    let (_, later) = ana.call(&app, "endpoint", &[("id", id)]).await;
    assert_eq!(
        (
            later["summary"]["attempts_24h"].as_i64(),
            later["attempts_7d"].as_i64()
        ),
        (Some(0), Some(8))
    );
    assert_eq!(later["p95_ms_24h"], Value::Null);
}

async fn pause_queues_and_resume_drains(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let rx = Receiver::start().await;
    let ep = ana
        .api(&app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    let id = ep["id"].as_str().unwrap();

    let (status, _) = ana.call(&app, "endpoint_pause", &[("id", id)]).await;
    assert_eq!(status, StatusCode::OK);
    let (_, d) = ana.call(&app, "endpoint", &[("id", id)]).await;
    assert_eq!(
        d["summary"]["condition"]["Paused"]["reason"],
        "paused by the customer"
    );
    ana.api(
        &app,
        "/api/v1/events",
        json!({ "type": "t", "payload": {} }),
    )
    .await;
    assert_eq!(app.engine.tick().await.unwrap(), 0);
    let (_, d) = ana.call(&app, "endpoint", &[("id", id)]).await;
    assert_eq!(d["pending"], 1, "the queue waiting for it");

    let (status, _) = ana.call(&app, "endpoint_resume", &[("id", id)]).await;
    assert_eq!(status, StatusCode::OK);
    tick_until_idle(&app).await;
    assert_eq!(rx.count(), 1);
    let (_, d) = ana.call(&app, "endpoint", &[("id", id)]).await;
    assert_eq!(d["summary"]["condition"], "Healthy");
    assert_eq!(d["pending"], 0);
}

async fn secrets_are_revealed_on_request_and_rotated(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let ep = ana
        .api(
            &app,
            "/api/v1/endpoints",
            json!({ "url": "https://example.com/hook" }),
        )
        .await;
    let id = ep["id"].as_str().unwrap();
    let secret = ep["secret"].as_str().unwrap();

    let (_, detail) = ana.call(&app, "endpoint", &[("id", id)]).await;
    assert!(
        !detail.to_string().contains(secret),
        "hidden until revealed"
    );
    let (status, shown) = ana.call(&app, "endpoint_secret", &[("id", id)]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(shown, secret);

    let refused = ana
        .web
        .post(app.url("/_fn/endpoint_secret"))
        .header("sec-fetch-site", "cross-site")
        .form(&[("id", id)])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(!refused.text().await.unwrap().contains(secret));

    let (status, _) = ana.call(&app, "endpoint_rotate", &[("id", id)]).await;
    assert_eq!(status, StatusCode::OK);
    let (_, rotated) = ana.call(&app, "endpoint_secret", &[("id", id)]).await;
    assert_ne!(rotated, secret);
    assert!(rotated.as_str().unwrap().starts_with("whsec_"));
    let (_, detail) = ana.call(&app, "endpoint", &[("id", id)]).await;
    let until = detail["previous_secret_until"]
        .as_i64()
        .expect("the old secret still signs");
    assert_eq!(until, detail["now"].as_i64().unwrap() + 24 * 3_600_000);
}

async fn a_test_event_goes_to_that_endpoint_only(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let target = Receiver::start().await;
    let other = Receiver::start().await;
    let ep = ana
        .api(
            &app,
            "/api/v1/endpoints",
            json!({ "url": target.url, "event_types": ["invoice.paid"] }),
        )
        .await;
    ana.api(&app, "/api/v1/endpoints", json!({ "url": other.url }))
        .await;

    let (status, event_id) = ana
        .call(&app, "endpoint_test", &[("id", ep["id"].as_str().unwrap())])
        .await;
    assert_eq!(status, StatusCode::OK, "{event_id}");
    tick_until_idle(&app).await;
    assert_eq!(other.count(), 0, "only the endpoint under test");
    let got = target.got();
    assert_eq!(got.len(), 1, "sent despite its event type filter");
    assert_eq!(got[0].headers["webhook-id"], event_id.as_str().unwrap());
    assert!(String::from_utf8_lossy(&got[0].body).contains("A test event"));
    let (_, detail) = ana
        .call(&app, "event", &[("id", event_id.as_str().unwrap())])
        .await;
    assert_eq!(detail["event_type"], "dakghar.test");
}

async fn another_account_cannot_see_or_change_an_endpoint(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let bob = customer(&app, "Bobco", "bob@bobco.example").await;
    let ep = ana
        .api(
            &app,
            "/api/v1/endpoints",
            json!({ "url": "https://example.com/hook" }),
        )
        .await;
    let id = ep["id"].as_str().unwrap();

    for f in [
        "endpoint",
        "endpoint_secret",
        "endpoint_pause",
        "endpoint_resume",
        "endpoint_rotate",
        "endpoint_test",
        "endpoint_delete",
        "endpoint_form",
    ] {
        let (status, body) = bob.call(&app, f, &[("id", id)]).await;
        assert!(!status.is_success(), "{f}");
        assert!(body.to_string().contains("NotFound"), "{f}: {body}");
    }
    let mut edit = create_form("https://bob.example/hook", "");
    edit.push(("id", id));
    let (status, body) = bob.call(&app, "endpoint_update", &edit).await;
    assert!(body.to_string().contains("NotFound"), "{status}: {body}");
    let (_, listed) = bob.call(&app, "endpoints", &[]).await;
    assert_eq!(listed, json!([]));
    let unchanged = app
        .store
        .endpoint(&ana.seeded.account.id, id)
        .await
        .unwrap();
    assert_eq!(unchanged.state, "active");
    assert_eq!(unchanged.url, "https://example.com/hook");
    assert_eq!(unchanged.secret, ep["secret"].as_str().unwrap());
    assert!(app
        .store
        .list_endpoints(&bob.seeded.account.id)
        .await
        .unwrap()
        .is_empty());
}

async fn the_page_shows_a_throttle_and_a_lowered_cap(store: Store) {
    let mut config = ServeConfig::for_tests();
    config.delivery.default_rate_limit = Some(50);
    let app = spawn_app_with(store, config).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let rx = Receiver::start().await;
    rx.script_with_headers(429, vec![("retry-after", "120".into())]);
    let ep = ana
        .api(
            &app,
            "/api/v1/endpoints",
            json!({ "url": rx.url, "max_in_flight": 4 }),
        )
        .await;
    let id = ep["id"].as_str().unwrap();
    let (_, d) = ana.call(&app, "endpoint", &[("id", id)]).await;
    assert_eq!(d["throttled_until"], Value::Null, "{d}");
    assert_eq!(
        (d["in_flight_cap"].clone(), d["max_in_flight"].clone()),
        (json!(4), json!(4))
    );
    assert_eq!(
        (
            d["rate_limit_per_sec"].clone(),
            d["rate_limit_is_default"].clone()
        ),
        (json!(50), json!(true))
    );

    ana.api(
        &app,
        "/api/v1/events",
        json!({ "type": "t", "payload": {} }),
    )
    .await;
    assert_eq!(app.engine.tick().await.unwrap(), 1);
    let (_, d) = ana.call(&app, "endpoint", &[("id", id)]).await;
    let now = app.clock.now().millis();
    assert_eq!(d["throttle_status"], 429, "{d}");
    assert_eq!(d["throttled_until"].as_i64(), Some(now + 120_000));
    assert_eq!(d["in_flight_cap"], 2, "a 429 halves the cap");
}

async fn a_paused_queue_is_discarded_only_at_the_count_shown(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let rx = Receiver::start().await;
    let ep = ana
        .api(&app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    let id = ep["id"].as_str().unwrap();
    ana.call(&app, "endpoint_pause", &[("id", id)]).await;
    for _ in 0..2 {
        ana.api(
            &app,
            "/api/v1/events",
            json!({ "type": "t", "payload": {} }),
        )
        .await;
    }
    let (_, d) = ana.call(&app, "endpoint", &[("id", id)]).await;
    assert_eq!(d["pending"], 2);
    let (status, body) = ana
        .call(
            &app,
            "endpoint_discard_queue",
            &[("id", id), ("expected", "5")],
        )
        .await;
    assert!(!status.is_success(), "{body}");
    assert!(body.to_string().contains("holds 2"), "{body}");
    let (status, n) = ana
        .call(
            &app,
            "endpoint_discard_queue",
            &[("id", id), ("expected", "2")],
        )
        .await;
    assert_eq!((status, n), (StatusCode::OK, json!(2)));
    let (_, resumed) = ana.call(&app, "endpoint_resume", &[("id", id)]).await;
    assert_eq!(resumed, json!({ "waiting": 0, "past_window": 0 }));
}

async fn an_endpoint_is_edited_with_an_error_on_each_wrong_field(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let (old_rx, new_rx) = (Receiver::start().await, Receiver::start().await);
    let ep = ana
        .api(
            &app,
            "/api/v1/endpoints",
            json!({ "url": old_rx.url, "description": "Billing",
                    "event_types": ["invoice.paid"], "rate_limit_per_sec": 7, "max_in_flight": 5 }),
        )
        .await;
    let id = ep["id"].as_str().unwrap();
    let (status, form) = ana.call(&app, "endpoint_form", &[("id", id)]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        form,
        json!({ "url": old_rx.url, "description": "Billing", "event_types": "invoice.paid",
                "rate_limit_per_sec": "7", "max_in_flight": "5" })
    );

    // Three wrong fields at once: each is named, nothing changes.
    let wrong = [
        ("id", id),
        ("form[url]", "ftp://example.com/x"),
        ("form[description]", "Billing v2"),
        ("form[event_types]", "invoice.paid"),
        ("form[rate_limit_per_sec]", "0"),
        ("form[max_in_flight]", "lots"),
    ];
    let (status, body) = ana.call(&app, "endpoint_update", &wrong).await;
    assert!(!status.is_success(), "{body}");
    let fields: Vec<&str> = body["Fields"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[0].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["url", "rate_limit_per_sec", "max_in_flight"]);
    let errors = body["Fields"]["errors"].to_string();
    assert!(
        errors.contains("http or https") && errors.contains("whole number"),
        "{errors}"
    );
    let unchanged = app
        .store
        .endpoint(&ana.seeded.account.id, id)
        .await
        .unwrap();
    assert_eq!(
        (unchanged.url.as_str(), unchanged.description.as_str()),
        (old_rx.url.as_str(), "Billing")
    );

    // Without JavaScript the browser posts the form itself and is sent
    // back to the page, which marks the fields and keeps what was typed.
    let page = app.url(&format!("/endpoints/{id}/edit"));
    let res = crate::helpers::form_post(&app, &ana.web, "endpoint_update", &page, &wrong).await;
    assert_eq!(res.status(), StatusCode::FOUND);
    let back = crate::helpers::location(&res);
    assert!(back.starts_with(&page) && back.contains("__err"), "{back}");
    let html = page_html(&ana.web, &back).await;
    for field in ["url", "rate_limit_per_sec", "max_in_flight"] {
        assert!(
            html.contains(&format!(r#"data-testid="field-error-{field}""#)),
            "{field} marked"
        );
    }
    assert!(!html.contains(r#"data-testid="field-error-event_types""#));
    assert_eq!(html.matches(r#"aria-invalid="true""#).count(), 3);
    for typed in [
        r#"value="lots""#,
        r#"value="Billing v2""#,
        r#"value="ftp://example.com/x""#,
    ] {
        assert!(html.contains(typed), "{typed} kept");
    }

    // A delivery waiting on the old URL takes the new one at its next
    // attempt; emptied limits go back to their defaults.
    old_rx.script(&[500]);
    ana.api(
        &app,
        "/api/v1/events",
        json!({ "type": "invoice.paid", "payload": {} }),
    )
    .await;
    tick_until_idle(&app).await;
    assert_eq!(old_rx.count(), 1);
    let right = [
        ("id", id),
        ("form[url]", new_rx.url.as_str()),
        ("form[description]", " Billing v2 "),
        ("form[event_types]", ""),
        ("form[rate_limit_per_sec]", ""),
        ("form[max_in_flight]", ""),
    ];
    let (status, body) = ana.call(&app, "endpoint_update", &right).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let changed = app
        .store
        .endpoint(&ana.seeded.account.id, id)
        .await
        .unwrap();
    assert_eq!(changed.url, new_rx.url);
    assert_eq!(changed.description, "Billing v2");
    assert!(changed.event_type_filter().is_empty());
    assert_eq!(changed.rate_limit_per_sec, None);
    assert_eq!(changed.max_in_flight, 10);
    app.clock.advance(Duration::from_secs(3600));
    tick_until_idle(&app).await;
    new_rx.wait_for(1).await;
    assert_eq!(old_rx.count(), 1, "the retry went to the new URL");

    // The page is linked from the endpoint's, for those who may change it.
    let detail = page_html(&ana.web, &app.url(&format!("/endpoints/{id}"))).await;
    assert!(detail.contains(&format!(r#"href="/endpoints/{id}/edit""#)));
}

/// `ms` as `<input type="datetime-local">` sends it, `offset` minutes east.
fn wall_clock(ms: i64, offset: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms + offset * 60_000)
        .unwrap()
        .format("%Y-%m-%dT%H:%M")
        .to_string()
}

async fn a_customer_recovers_what_failed_since_a_time(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let bob = customer(&app, "Bobco", "bob@bobco.example").await;
    let (rx, other_rx) = (Receiver::start().await, Receiver::start().await);
    let ep = ana
        .api(&app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    ana.api(&app, "/api/v1/endpoints", json!({ "url": other_rx.url }))
        .await;
    let id = ep["id"].as_str().unwrap();
    let send = |n: usize| {
        rx.script(&vec![400; n]);
        other_rx.script(&vec![400; n]);
        let (ana, app) = (&ana, &app);
        async move {
            for _ in 0..n {
                ana.api(app, "/api/v1/events", json!({ "type": "t", "payload": {} }))
                    .await;
            }
            tick_until_idle(app).await;
        }
    };
    let early = app.clock.now().millis();
    send(3).await;
    app.clock.advance(Duration::from_secs(3600));
    let late = app.clock.now().millis();
    send(1).await;
    assert_eq!((rx.count(), other_rx.count()), (4, 4), "all refused once");

    let preview = |since: String, offset: &'static str| {
        let ana = &ana;
        let app = &app;
        async move {
            let form = [
                ("id", id),
                ("form[since]", since.as_str()),
                ("form[offset]", offset),
            ];
            ana.call(app, "endpoint_recover_preview", &form).await
        }
    };
    let (status, p) = preview(wall_clock(late - 60_000, 0), "0").await;
    assert_eq!(status, StatusCode::OK, "{p}");
    assert_eq!(p["count"], 1);
    // The same moment typed on a clock two hours east.
    let (_, p) = preview(wall_clock(early - 60_000, 120), "120").await;
    assert_eq!(p["count"], 4);
    let since = p["since"].as_i64().unwrap();
    assert_eq!(since, (early - 60_000) / 60_000 * 60_000);
    let (status, p) = preview(wall_clock(late + 3_600_000, 0), "0").await;
    assert!(
        !status.is_success() && p.to_string().contains("future"),
        "{p}"
    );
    let (_, p) = preview("yesterday".into(), "0").await;
    assert!(p.to_string().contains("pick a date"), "{p}");

    // Without JavaScript the preview is a page of its own.
    let page = app.url(&format!(
        "/endpoints/{id}/recover?since={}&offset=0",
        wall_clock(early - 60_000, 0)
    ));
    let html = page_html(&ana.web, &page).await;
    assert!(
        html.contains("4 deliveries to this endpoint failed"),
        "{html}"
    );
    assert!(html.contains("Send 4 deliveries again"));

    let since_text = since.to_string();
    let confirm = [("id", id), ("since", since_text.as_str())];
    let (status, body) = bob.call(&app, "endpoint_recover", &confirm).await;
    assert!(body.to_string().contains("NotFound"), "{status}: {body}");
    let (status, n) = ana.call(&app, "endpoint_recover", &confirm).await;
    assert_eq!((status, n), (StatusCode::OK, json!(4)));
    let audit = app.store.replays(None, 10).await.unwrap();
    assert_eq!(audit[0].kind, "recover");
    assert_eq!(audit[0].count, 4);
    assert_eq!(audit[0].actor, format!("user:{}", ana.seeded.user.id));

    // A second one within ten minutes is refused, also without JavaScript,
    // where the page says how long to wait.
    let (status, body) = ana.call(&app, "endpoint_recover", &confirm).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let res = crate::helpers::form_post(&app, &ana.web, "endpoint_recover", &page, &confirm).await;
    assert_eq!(res.status(), StatusCode::FOUND);
    let back = crate::helpers::location(&res);
    let html = page_html(&ana.web, &back).await;
    assert!(html.contains(r#"data-testid="recover-limited""#), "{html}");
    assert!(html.contains("Try again in "));

    // Spread over five minutes; this time the receiver takes them, and the
    // other endpoint's failures stay as they were.
    app.clock.advance(Duration::from_secs(300));
    tick_until_idle(&app).await;
    rx.wait_for(8).await;
    assert_eq!(other_rx.count(), 4);
    let (_, listed) = ana.call(&app, "events", &[]).await;
    for row in listed["rows"].as_array().unwrap() {
        for d in row["deliveries"].as_array().unwrap() {
            let expected = if d["endpoint_url"] == rx.url.as_str() {
                "Delivered"
            } else {
                "Failed"
            };
            assert_eq!(d["status"], expected, "{d}");
        }
    }
}
