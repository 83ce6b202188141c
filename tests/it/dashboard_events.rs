//! The events pages' server functions, called as the browser calls them:
//! a signed-in session, form-encoded arguments, JSON answers.

use std::time::Duration;

use dakghar::{
    auth::api_key,
    clock::Clock,
    config::ServeConfig,
    store::{AccountRole, DeliveryState, Store},
};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::{
    helpers::{
        member, page_html, seed_user, server_fn, signed_in, spawn_app_with, Seeded, StateOf,
        TestApp,
    },
    receiver::Receiver,
};

on_both_backends!(
    the_list_filters_by_state_type_endpoint_time_and_id_and_pages,
    the_detail_shows_every_attempt_and_never_the_secret,
    resend_from_the_dashboard_is_audited_and_refuses_unfinished_deliveries,
    the_resend_limit_is_shared_with_the_api_and_answers_429,
    another_account_gets_not_found_and_changes_nothing,
    cross_site_resends_are_refused,
    events_with_awkward_ids_link_to_their_own_page,
    a_paused_endpoints_waiting_delivery_is_resent_from_the_event_page,
    the_payload_shown_is_the_payload_sent,
    copy_as_curl_reaches_the_receiver_and_verifies,
    badges_name_each_endpoint_and_headers_as_sent_are_the_newest,
    an_unknown_event_is_a_404_page,
);

/// A signed-in customer with an API key for their own account.
pub struct Customer {
    pub seeded: Seeded,
    pub web: reqwest::Client,
    key: String,
}

pub async fn customer(app: &TestApp, account: &str, email: &str) -> Customer {
    let seeded = seed_user(&app.store, &app.clock, account, email).await;
    let k = api_key::generate();
    app.store
        .create_api_key(
            &seeded.account.id,
            "",
            &k.prefix,
            &k.hash,
            false,
            app.clock.now(),
        )
        .await
        .unwrap();
    Customer {
        seeded,
        web: signed_in(app, email).await,
        key: k.key,
    }
}

impl Customer {
    pub fn key(&self) -> &str {
        &self.key
    }

    pub async fn api(&self, app: &TestApp, path: &str, body: Value) -> Value {
        let res = reqwest::Client::new()
            .post(app.url(path))
            .bearer_auth(&self.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "{path}: {}", res.status());
        res.json().await.unwrap()
    }

    /// Calls a server function; returns the status and the JSON answer.
    pub async fn call(
        &self,
        app: &TestApp,
        endpoint: &str,
        form: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        server_fn(app, &self.web, endpoint, form).await
    }

    async fn events(&self, app: &TestApp, filters: &[(&str, &str)]) -> Value {
        let form: Vec<(String, &str)> = filters
            .iter()
            .map(|(k, v)| (format!("query[{k}]"), *v))
            .collect();
        let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let (status, body) = self.call(app, "events", &form).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }
}

fn ids(list: &Value) -> Vec<String> {
    list["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// An endpoint on a fresh receiver answering `status`, one event, one
/// attempt; returns the delivery's id.
async fn one_attempted_delivery(app: &TestApp, who: &Customer, status: u16) -> String {
    let rx = Receiver::start().await;
    rx.script(&[status]);
    who.api(app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    let ev = who
        .api(app, "/api/v1/events", json!({ "type": "t", "payload": {} }))
        .await;
    app.engine.tick().await.unwrap();
    ev["deliveries"][0]["id"].as_str().unwrap().to_string()
}

pub async fn tick_until_idle(app: &TestApp) {
    while app.engine.tick().await.unwrap() > 0 {}
}

async fn the_list_filters_by_state_type_endpoint_time_and_id_and_pages(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let ok_rx = Receiver::start().await;
    let bad_rx = Receiver::start().await;
    let ok_ep = ana
        .api(
            &app,
            "/api/v1/endpoints",
            json!({ "url": ok_rx.url, "event_types": ["invoice.paid"] }),
        )
        .await;
    let bad_ep = ana
        .api(
            &app,
            "/api/v1/endpoints",
            json!({ "url": bad_rx.url, "event_types": ["invoice.failed"] }),
        )
        .await;
    bad_rx.script(&[400; 20]);

    let empty = ana.events(&app, &[]).await;
    assert_eq!(ids(&empty), Vec::<String>::new());
    assert_eq!(empty["next_cursor"], Value::Null);

    for i in 0..30 {
        let ty = if i % 3 == 0 {
            "invoice.failed"
        } else {
            "invoice.paid"
        };
        ana.api(
            &app,
            "/api/v1/events",
            json!({ "id": format!("evt_{i:02}"), "type": ty, "payload": {} }),
        )
        .await;
        app.clock.advance(Duration::from_secs(1));
    }
    tick_until_idle(&app).await;

    let first = ana.events(&app, &[]).await;
    let first_ids = ids(&first);
    assert_eq!(first_ids.len(), 25, "a page of 25");
    assert_eq!(first_ids[0], "evt_29", "newest first");
    let row = &first["rows"][0];
    assert_eq!(row["event_type"], "invoice.paid");
    assert_eq!(row["deliveries"][0]["status"], "Delivered");
    assert_eq!(row["deliveries"][0]["endpoint_url"], ok_rx.url.as_str());
    assert_eq!(
        row["deliveries"][0]["endpoint_name"],
        ok_rx
            .url
            .trim_start_matches("http://")
            .trim_end_matches('/')
    );
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_string();
    let second = ana.events(&app, &[("cursor", &cursor)]).await;
    assert_eq!(
        ids(&second),
        ["evt_04", "evt_03", "evt_02", "evt_01", "evt_00"]
    );
    assert_eq!(second["next_cursor"], Value::Null);

    let failed = ana.events(&app, &[("state", "failed")]).await;
    assert_eq!(ids(&failed).len(), 10);
    assert!(failed["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["event_type"] == "invoice.failed"));
    let by_type = ana.events(&app, &[("event_type", "invoice.paid")]).await;
    assert_eq!(ids(&by_type).len(), 20);
    let by_endpoint = ana
        .events(&app, &[("endpoint", bad_ep["id"].as_str().unwrap())])
        .await;
    assert_eq!(ids(&by_endpoint).len(), 10);
    let by_id = ana.events(&app, &[("id", "evt_07")]).await;
    assert_eq!(ids(&by_id), ["evt_07"]);
    let none = ana.events(&app, &[("id", "evt_nope")]).await;
    assert!(ids(&none).is_empty());
    assert_eq!(first["endpoints"].as_array().unwrap().len(), 2);
    let _ = ok_ep;

    // The last hour holds the newest events only once the clock moves on.
    app.clock.advance(Duration::from_secs(3600 - 15));
    let recent = ana.events(&app, &[("range", "1h")]).await;
    assert_eq!(ids(&recent).len(), 15, "{:?}", ids(&recent));

    // Filters that cannot be read keep the form and say why.
    for (key, value, why) in [
        ("query[state]", "bogus", "unknown delivery state"),
        ("query[cursor]", "garbage", "page link"),
        ("query[status]", "6xx", "is not a status"),
        ("query[from]", "yesterday", "is not a date"),
    ] {
        let (status, body) = ana.call(&app, "events", &[(key, value)]).await;
        assert!(status.is_success(), "{key}: {body}");
        let problem = body["problem"].as_str().unwrap_or_default();
        assert!(problem.contains(why), "{key}: {body}");
        assert!(body["rows"].as_array().unwrap().is_empty());
        assert_eq!(body["endpoints"].as_array().unwrap().len(), 2);
    }
}

async fn the_detail_shows_every_attempt_and_never_the_secret(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let rx = Receiver::start().await;
    let ep = ana
        .api(&app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    let secret = ep["secret"].as_str().unwrap().to_string();
    rx.script_with_headers(
        503,
        vec![("retry-after", "5".into()), ("x-trace", "abc".into())],
    );
    ana.api(&app, "/api/v1/events", json!({ "id": "evt_1", "type": "invoice.paid", "payload": {"amount": 42, "who": "O'Brien"} }))
        .await;
    app.engine.tick().await.unwrap();

    let (status, pending) = ana.call(&app, "event", &[("id", "evt_1")]).await;
    assert_eq!(status, StatusCode::OK, "{pending}");
    let d = &pending["deliveries"][0];
    assert_eq!(d["status"], "Retrying");
    let next = d["next_attempt_at"].as_i64().expect("a next attempt time");
    assert!(next > pending["now"].as_i64().unwrap());
    assert!(d["give_up_at"].as_i64().unwrap() > next);

    app.clock.advance(Duration::from_secs(3600));
    app.engine.tick().await.unwrap();
    let (_, detail) = ana.call(&app, "event", &[("id", "evt_1")]).await;
    assert_eq!(detail["event_type"], "invoice.paid");
    assert_eq!(detail["payload"], r#"{"amount":42,"who":"O'Brien"}"#);
    let d = &detail["deliveries"][0];
    assert_eq!(d["status"], "Delivered");
    assert_eq!(d["next_attempt_at"], Value::Null);
    let attempts = d["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(
        (
            attempts[0]["number"].as_i64(),
            attempts[0]["status"].as_i64()
        ),
        (Some(2), Some(200)),
        "newest first"
    );
    let first = &attempts[1];
    assert_eq!(first["status"], 503);
    assert!(first["explanation"]
        .as_str()
        .unwrap()
        .starts_with("503 Service Unavailable — transient"));
    assert!(first["response_headers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h[0] == "x-trace" && h[1] == "abc"));
    assert_eq!(first["response_snippet"], "receiver says hi");
    assert!(first["duration_ms"].as_i64().unwrap() >= 0);
    let sent: Vec<String> = first["request_headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h[0].as_str().unwrap().to_string())
        .collect();
    for h in [
        "content-type",
        "user-agent",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    ] {
        assert!(sent.iter().any(|s| s == h), "{h} in {sent:?}");
    }
    let curl = first["curl"].as_str().unwrap();
    assert!(
        curl.contains(&format!("curl -X POST '{}'", rx.url)),
        "{curl}"
    );
    assert!(curl.contains("webhook-id: evt_1"), "{curl}");
    assert!(
        curl.contains(r#"O'\''Brien"#),
        "single quotes survive the shell: {curl}"
    );
    let whole = detail.to_string();
    assert!(
        !whole.contains(&secret),
        "the secret never reaches the page"
    );
    assert!(!whole.contains(secret.trim_start_matches("whsec_")));

    let (status, missing) = ana.call(&app, "event", &[("id", "evt_nope")]).await;
    assert!(!status.is_success());
    assert!(missing.to_string().contains("NotFound"), "{missing}");
}

async fn resend_from_the_dashboard_is_audited_and_refuses_unfinished_deliveries(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let delivery_id = one_attempted_delivery(&app, &ana, 422).await;
    assert_eq!(
        app.store.delivery(&delivery_id).await.unwrap().state(),
        Some(DeliveryState::Failed)
    );

    let (status, body) = ana
        .call(&app, "resend", &[("delivery_id", &delivery_id)])
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let d = app.store.delivery(&delivery_id).await.unwrap();
    assert_eq!(
        (d.state(), d.attempts, d.attempt_seq),
        (Some(DeliveryState::Pending), 0, 1)
    );

    let (status, body) = ana
        .call(&app, "resend", &[("delivery_id", &delivery_id)])
        .await;
    assert!(!status.is_success());
    assert!(body.to_string().contains("already pending"), "{body}");

    app.engine.tick().await.unwrap();
    let d = app.store.delivery(&delivery_id).await.unwrap();
    assert_eq!(
        (d.state(), d.attempt_seq),
        (Some(DeliveryState::Delivered), 2)
    );

    let audit = app
        .store
        .replays(Some(&ana.seeded.account.id), 10)
        .await
        .unwrap();
    assert_eq!(audit.len(), 1, "the refused resend wrote nothing");
    assert_eq!(audit[0].actor, format!("user:{}", ana.seeded.user.id));
    assert_eq!(audit[0].kind, "single");
    assert!(audit[0].criteria.contains(&delivery_id));
}

async fn the_resend_limit_is_shared_with_the_api_and_answers_429(store: Store) {
    let mut config = ServeConfig::for_tests();
    config.resends_per_minute = 2;
    let app = spawn_app_with(store, config).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let rx = Receiver::start().await;
    ana.api(
        &app,
        "/api/v1/endpoints",
        json!({ "url": rx.url, "max_in_flight": 50 }),
    )
    .await;
    let mut deliveries = Vec::new();
    for _ in 0..3 {
        let ev = ana
            .api(
                &app,
                "/api/v1/events",
                json!({ "type": "t", "payload": {} }),
            )
            .await;
        deliveries.push(ev["deliveries"][0]["id"].as_str().unwrap().to_string());
    }
    tick_until_idle(&app).await;

    let (status, _) = ana
        .call(&app, "resend", &[("delivery_id", &deliveries[0])])
        .await;
    assert_eq!(status, StatusCode::OK);
    let via_api = ana
        .api(
            &app,
            &format!("/api/v1/deliveries/{}/resend", deliveries[1]),
            json!({}),
        )
        .await;
    assert_eq!(via_api["state"], "pending");

    let res = ana
        .web
        .post(app.url("/_fn/resend"))
        .form(&[("delivery_id", deliveries[2].as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["RateLimited"]["retry_after_s"], wait);
    assert_eq!(
        app.store.delivery(&deliveries[2]).await.unwrap().state(),
        Some(DeliveryState::Delivered),
        "nothing changed"
    );

    // A page without JavaScript posts the form itself: it is sent back to
    // the page, which says how long to wait on that delivery's button.
    let event_id = app.store.delivery(&deliveries[2]).await.unwrap().event_id;
    let page = app.url(&format!("/events/{event_id}"));
    let res = crate::helpers::form_post(
        &app,
        &ana.web,
        "resend",
        &page,
        &[("delivery_id", deliveries[2].as_str())],
    )
    .await;
    assert_eq!(
        res.status(),
        StatusCode::FOUND,
        "a redirect, not a 429 page"
    );
    let back = crate::helpers::location(&res);
    assert!(back.starts_with(&page) && back.contains("__err"), "{back}");
    let html = page_html(&ana.web, &back).await;
    let card = html
        .split(&format!(r#"data-delivery-id="{}""#, deliveries[2]))
        .nth(1)
        .expect("the delivery's card");
    assert!(card.contains("Try again in "), "{card}");

    app.clock.advance(Duration::from_secs(wait));
    let (status, _) = ana
        .call(&app, "resend", &[("delivery_id", &deliveries[2])])
        .await;
    assert_eq!(status, StatusCode::OK, "the next minute has room again");
}

async fn another_account_gets_not_found_and_changes_nothing(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let bob = customer(&app, "Bobco", "bob@bobco.example").await;
    let rx = Receiver::start().await;
    ana.api(&app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    let ev = ana
        .api(
            &app,
            "/api/v1/events",
            json!({ "id": "evt_ana", "type": "t", "payload": {} }),
        )
        .await;
    let delivery_id = ev["deliveries"][0]["id"].as_str().unwrap().to_string();
    app.engine.tick().await.unwrap();

    let (status, body) = bob.call(&app, "event", &[("id", "evt_ana")]).await;
    assert!(!status.is_success());
    assert!(body.to_string().contains("NotFound"), "{body}");
    let (status, body) = bob
        .call(&app, "resend", &[("delivery_id", &delivery_id)])
        .await;
    assert!(!status.is_success());
    assert!(body.to_string().contains("NotFound"), "{body}");
    let listed = bob.events(&app, &[]).await;
    assert!(ids(&listed).is_empty(), "bob sees none of ana's events");
    let filtered = bob.events(&app, &[("id", "evt_ana")]).await;
    assert!(ids(&filtered).is_empty());

    let d = app.store.delivery(&delivery_id).await.unwrap();
    assert_eq!(
        (d.state(), d.attempt_seq),
        (Some(DeliveryState::Delivered), 1)
    );
    assert!(app.store.replays(None, 10).await.unwrap().is_empty());
}

async fn cross_site_resends_are_refused(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let delivery_id = one_attempted_delivery(&app, &ana, 200).await;

    for (header, value) in [
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-site", "same-site"),
        ("origin", "http://evil.example"),
    ] {
        let res = ana
            .web
            .post(app.url("/_fn/resend"))
            .header(header, value)
            .form(&[("delivery_id", delivery_id.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN, "{header}: {value}");
    }
    let d = app.store.delivery(&delivery_id).await.unwrap();
    assert_eq!(d.state(), Some(DeliveryState::Delivered), "nothing changed");

    let same_origin = ana
        .web
        .post(app.url("/_fn/resend"))
        .header("sec-fetch-site", "same-origin")
        .header("origin", app.base.as_str())
        .form(&[("delivery_id", delivery_id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(same_origin.status(), StatusCode::OK);
}

async fn events_with_awkward_ids_link_to_their_own_page(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    for (id, marker) in [
        ("order/42?x=1#top", "marker-slash"),
        ("100% done", "marker-percent"),
    ] {
        ana.api(
            &app,
            "/api/v1/events",
            json!({ "id": id, "type": "t", "payload": { "m": marker } }),
        )
        .await;
    }
    let list = page_html(&ana.web, &app.url("/events")).await;
    for (id, marker) in [
        ("order/42?x=1#top", "marker-slash"),
        ("100% done", "marker-percent"),
    ] {
        let encoded: String = id
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        let href = format!("/events/{encoded}");
        assert!(
            list.contains(&format!(r#"href="{href}""#)),
            "{href} in the list"
        );
        let page = ana.web.get(app.url(&href)).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK, "{href}");
        let html = page.text().await.unwrap();
        assert!(html.contains(marker), "{href} opens its own event");
    }
}

async fn a_paused_endpoints_waiting_delivery_is_resent_from_the_event_page(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let rx = Receiver::start().await;
    let ep = ana
        .api(&app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    let ep_id = ep["id"].as_str().unwrap();
    ana.call(&app, "endpoint_pause", &[("id", ep_id)]).await;
    let ev = ana
        .api(
            &app,
            "/api/v1/events",
            json!({ "id": "evt_held", "type": "t", "payload": {} }),
        )
        .await;
    let delivery_id = ev["deliveries"][0]["id"].as_str().unwrap().to_string();
    let (_, detail) = ana.call(&app, "event", &[("id", "evt_held")]).await;
    assert_eq!(detail["deliveries"][0]["endpoint_paused"], true, "{detail}");
    let (status, body) = ana
        .call(&app, "resend", &[("delivery_id", &delivery_id)])
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(rx.count(), 0, "still paused");
}

/// Sends `body` as it is (a `json!` would reorder and merge its keys).
async fn post_raw(app: &TestApp, who: &Customer, body: &str) -> Value {
    let res = reqwest::Client::new()
        .post(app.url("/api/v1/events"))
        .bearer_auth(who.key())
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    res.json().await.unwrap()
}

/// Order, number text and a duplicate key: what a parser would change.
const AWKWARD: &str = r#"{"b":1,"a":2,"n":12345678901234567890123,"a":3}"#;

async fn the_payload_shown_is_the_payload_sent(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let rx = Receiver::start().await;
    ana.api(&app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    post_raw(
        &app,
        &ana,
        &format!(r#"{{"id":"evt_raw","type":"t","payload":{AWKWARD}}}"#),
    )
    .await;
    app.engine.tick().await.unwrap();
    assert_eq!(rx.got()[0].body, AWKWARD.as_bytes(), "sent as given");

    let (status, detail) = ana.call(&app, "event", &[("id", "evt_raw")]).await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    assert_eq!(detail["payload"], AWKWARD, "byte for byte");

    // The page: Raw holds the exact text, Pretty the same tokens in order.
    let html = page_html(&ana.web, &app.url("/events/evt_raw")).await;
    let raw = html
        .split(r#"data-testid="payload-raw""#)
        .nth(1)
        .expect("a raw view");
    assert!(raw.contains(AWKWARD), "{raw}");
    // Times reach the page in UTC, marked up for the browser to localise.
    assert!(
        html.contains(r#"<time datetime=""#) && html.contains(r#" UTC">"#),
        "{html}"
    );
    let pretty = html
        .split(r#"data-testid="payload""#)
        .nth(1)
        .and_then(|p| p.split("</pre>").next())
        .expect("a pretty view");
    let text: String = pretty
        .split('<')
        .filter_map(|piece| piece.split_once('>').map(|(_, t)| t))
        .collect();
    let tokens: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(
        tokens,
        [
            "{",
            "\"b\":",
            "1,",
            "\"a\":",
            "2,",
            "\"n\":",
            "12345678901234567890123,",
            "\"a\":",
            "3",
            "}"
        ],
        "{text}"
    );
}

/// Runs a shell command as a customer would paste it.
fn paste(command: &str) {
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{command}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn copy_as_curl_reaches_the_receiver_and_verifies(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let rx = Receiver::start().await;
    let ep = ana
        .api(&app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    let secret = ep["secret"].as_str().unwrap().to_string();
    rx.verify_with(&secret);
    let sent = post_raw(
        &app,
        &ana,
        r#"{"id":"evt_curl","type":"t","payload":{"who":"O'Brien","n":1.50}}"#,
    )
    .await;
    let delivery = sent["deliveries"][0]["id"].as_str().unwrap().to_string();
    app.engine.tick().await.unwrap();
    assert_eq!(rx.got()[0].verified, Some(true));

    // Signed by the server, now: the pasted command verifies.
    let (status, command) = ana
        .call(&app, "signed_curl", &[("delivery_id", &delivery)])
        .await;
    assert_eq!(status, StatusCode::OK, "{command}");
    let command = command.as_str().unwrap().to_string();
    assert!(!command.contains(&secret), "a signature, never the secret");
    paste(&command);
    let got = rx.got();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].verified, Some(true), "{command}");
    assert_eq!(got[1].body, got[0].body, "the same bytes");
    assert_eq!(got[1].headers["webhook-id"], "evt_curl");

    // The recipe on the page signs with the secret pasted in.
    let (_, detail) = ana.call(&app, "event", &[("id", "evt_curl")]).await;
    let recipe = detail["deliveries"][0]["attempts"][0]["curl"]
        .as_str()
        .unwrap()
        .replace("whsec_…", &secret);
    paste(&recipe);
    let got = rx.got();
    assert_eq!(got.len(), 3);
    assert_eq!(got[2].verified, Some(true), "{recipe}");
    assert_eq!(got[2].body, got[0].body);

    // A viewer may not have a signature made.
    let vic = member(
        &app,
        &ana.seeded.account.id,
        "vic@acme.example",
        AccountRole::Viewer,
    )
    .await;
    let (status, _) = server_fn(&app, &vic, "signed_curl", &[("delivery_id", &delivery)]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Nor another account's.
    let bob = customer(&app, "Bobco", "bob@bobco.example").await;
    let (status, _) = bob
        .call(&app, "signed_curl", &[("delivery_id", &delivery)])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn badges_name_each_endpoint_and_headers_as_sent_are_the_newest(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let rx = Receiver::start().await;
    rx.script(&[500]);
    let base = rx.url.trim_end_matches('/').to_string();
    ana.api(
        &app,
        "/api/v1/endpoints",
        json!({ "url": format!("{base}/healthy"), "description": "Billing" }),
    )
    .await;
    ana.api(
        &app,
        "/api/v1/endpoints",
        json!({ "url": format!("{base}/flaky?x=1") }),
    )
    .await;
    ana.api(
        &app,
        "/api/v1/events",
        json!({ "id": "evt_n", "type": "t", "payload": {} }),
    )
    .await;
    tick_until_idle(&app).await;
    let list = ana.events(&app, &[]).await;
    let mut names: Vec<String> = list["rows"][0]["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["endpoint_name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    let host = base.trim_start_matches("http://");
    let mut want = ["Billing".to_string(), format!("{host}/flaky")];
    want.sort();
    assert_eq!(names, want);

    // One of them failed and retried: the newest attempt's headers lead.
    app.clock.advance(Duration::from_secs(3600));
    tick_until_idle(&app).await;
    let html = page_html(&ana.web, &app.url("/events/evt_n")).await;
    let (_, detail) = ana.call(&app, "event", &[("id", "evt_n")]).await;
    let newest_ts = detail["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["attempts"].as_array().unwrap().len() == 2)
        .map(|d| {
            let headers = d["attempts"][0]["request_headers"].as_array().unwrap();
            let ts = headers
                .iter()
                .find(|h| h[0] == "webhook-timestamp")
                .unwrap();
            ts[1].as_str().unwrap().to_string()
        })
        .expect("a retried delivery");
    let first_card = detail["deliveries"][0]["attempts"]
        .as_array()
        .unwrap()
        .len();
    let sent_block = html
        .split("Headers as sent")
        .nth(1)
        .and_then(|s| s.split("</section>").next())
        .unwrap();
    if first_card == 2 {
        assert!(
            sent_block.contains(&newest_ts),
            "the newest attempt: {sent_block}"
        );
    }
    assert!(html.contains("Billing"), "the card names the endpoint");
}

async fn an_unknown_event_is_a_404_page(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let res = ana
        .web
        .get(app.url("/events/evt_nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert!(res.text().await.unwrap().contains("not found"));
    let (status, _) = ana.call(&app, "event", &[("id", "evt_nope")]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Signed out, the page sends to sign-in and back here afterwards.
    let res = crate::helpers::browser()
        .get(app.url("/events/evt_nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        crate::helpers::location(&res),
        "/login?next=%2Fevents%2Fevt_nope"
    );
}
