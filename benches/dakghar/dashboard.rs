//! The dashboard's pages over a million deliveries in one account, timed
//! through HTTP as a signed-in customer sees them (query and render).

use std::{
    path::Path,
    time::{Duration, Instant},
};

use dakghar::clock::{Clock, SystemClock};

use crate::{
    db::{Backend, BenchDb},
    receiver::Receiver,
    seed,
    server::Server,
    stats::{spread, Spread},
};

/// The path of the i-th request to a page.
type PathFor = Box<dyn Fn(usize) -> String>;

pub const EVENTS: i64 = 100_000;
pub const ENDPOINTS: usize = 10;

pub struct Figures {
    pub seed_secs: f64,
    pub pages: Vec<(&'static str, Spread)>,
}

pub async fn run(backend: &Backend, rx: &Receiver, dir: &Path) -> Figures {
    let db = BenchDb::new(backend).await;
    let store = db.store.clone();
    let account = seed::account(&store, ENDPOINTS, &rx.fast_url, 10).await;
    seed::user(&store, &account).await;
    let endpoints = store.list_endpoints(&account.id).await.unwrap();
    let start = Instant::now();
    let series = |backend: &Backend| {
        match backend {
        Backend::Sqlite => (
            format!(
                "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {EVENTS}) "
            ),
            "s".to_string(),
            "CAST('{\"n\":1}' AS BLOB)",
        ),
        Backend::Postgres(_) => (
            String::new(),
            format!("generate_series(1, {EVENTS}) AS s(n)"),
            "convert_to('{\"n\":1}', 'UTF8')",
        ),
    }
    };
    let (with, from, blob) = series(backend);
    let t0 = SystemClock.now().millis() - EVENTS * 10 - 60_000;
    let event_id = "'evt_' || substr(CAST(10000000 + n AS TEXT), 2)";
    let acc = &account.id;
    store
        .execute_script(&format!(
            "{with}INSERT INTO events (account_id, id, event_type, payload, created_at) \
             SELECT '{acc}', {event_id}, \
               CASE WHEN n % 10000 = 7 THEN 'payout.reversed' \
                 WHEN n % 4 = 0 THEN 'invoice.paid' WHEN n % 4 = 1 THEN 'invoice.failed' \
                 WHEN n % 4 = 2 THEN 'customer.created' ELSE 'charge.refunded' END, \
               {blob}, {t0} + n * 10 FROM {from}"
        ))
        .await
        .unwrap();
    for (k, ep) in endpoints.iter().enumerate() {
        // 90 % delivered, 5 % failed, 3 % expired, 2 % waiting for a retry;
        // the last answers: 204, 400, 429 (1 %), 503, and timeouts (1 %).
        let bucket = format!("((n * 7 + {k}) % 100)");
        let state = format!(
            "CASE WHEN {bucket} < 90 THEN 'delivered' WHEN {bucket} < 95 THEN 'failed' \
             WHEN {bucket} < 98 THEN 'expired' ELSE 'pending' END"
        );
        let created = format!("({t0} + n * 10)");
        store
            .execute_script(&format!(
                "{with}INSERT INTO deliveries (id, account_id, event_id, endpoint_id, state, \
                   attempts, attempt_seq, next_attempt_at, give_up_at, last_status, last_error, \
                   finished_at, created_at, updated_at) \
                 SELECT 'dlv_{k}_' || n, '{acc}', {event_id}, '{ep}', {state}, \
                   CASE WHEN {bucket} < 90 THEN 0 ELSE 2 END, \
                   CASE WHEN {bucket} < 90 THEN 1 ELSE 2 END, \
                   CASE WHEN {bucket} < 98 THEN {created} ELSE {created} + 86400000 END, \
                   {created} + 259200000, \
                   CASE WHEN {bucket} < 90 THEN 204 WHEN {bucket} < 94 THEN 400 \
                     WHEN {bucket} = 94 THEN 429 WHEN {bucket} = 97 THEN NULL ELSE 503 END, \
                   CASE WHEN {bucket} = 97 THEN 'timed out: operation timed out' END, \
                   CASE WHEN {bucket} < 98 THEN {created} + 1000 END, \
                   {created}, {created} FROM {from}",
                ep = ep.id
            ))
            .await
            .unwrap();
    }
    store
        .execute_script(&format!(
            "INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, request_headers, \
               response_status, response_headers, response_body, error, classification, endpoint_id) \
             SELECT id, a.k, created_at + a.k * 1000, 12, '{{}}', last_status, '{{}}', NULL, NULL, \
               CASE WHEN a.k = 2 AND last_status = 400 THEN 'failed' ELSE 'retry' END, endpoint_id \
             FROM deliveries CROSS JOIN (SELECT 1 AS k UNION ALL SELECT 2) a \
             WHERE account_id = '{acc}' AND state <> 'delivered'"
        ))
        .await
        .unwrap();
    if matches!(backend, Backend::Postgres(_)) {
        // What autovacuum does soon after a load this size.
        store.execute_script("ANALYZE").await.unwrap();
    }
    let seed_secs = start.elapsed().as_secs_f64();
    eprintln!("  seeded 1 M deliveries in {seed_secs:.0}s");

    let node = Server::start(&db.child_url, &[], dir).await;
    let web = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let res = web
        .post(format!("{}/login", node.base))
        .form(&[
            ("email", seed::EMAIL),
            ("password", seed::PASSWORD),
            ("next", ""),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303, "bench login failed");
    let ep = endpoints[3].id.clone();
    let ep_failed = endpoints[5].id.clone();
    // Five minutes in the middle of the seeded span, as the form sends them.
    let minute = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .unwrap()
            .format("%Y-%m-%dT%H:%M")
            .to_string()
    };
    let (from, to) = (minute(t0 + 300_000), minute(t0 + 600_000));
    let detail = |i: usize| format!("/events/evt_{:07}", 13 + 100 * (i % 900));
    let pages: Vec<(&'static str, PathFor, &str)> = vec![
        (
            "event list, first page",
            Box::new(|_| "/events".into()),
            "evt_",
        ),
        (
            "event list, state=failed",
            Box::new(|_| "/events?state=failed".into()),
            "evt_",
        ),
        (
            "event list, type and endpoint",
            Box::new(move |_| format!("/events?type=charge.refunded&endpoint={ep}")),
            "evt_",
        ),
        (
            "event list, type and state=delivered",
            Box::new(|_| "/events?type=invoice.paid&state=delivered".into()),
            "evt_",
        ),
        (
            "event list, type and last answer 5xx",
            Box::new(|_| "/events?type=invoice.paid&status=5xx".into()),
            "evt_",
        ),
        (
            "event list, type and last answer timeout",
            Box::new(|_| "/events?type=invoice.paid&status=timeout".into()),
            "evt_",
        ),
        (
            "event list, type and last answer matching nothing (418)",
            Box::new(|_| "/events?type=invoice.paid&status=418".into()),
            "",
        ),
        (
            "event list, filter matching nothing",
            Box::new(|_| "/events?state=in_flight".into()),
            "",
        ),
        (
            "event list, type alone (1 event in 10 000)",
            Box::new(|_| "/events?type=payout.reversed".into()),
            "evt_",
        ),
        (
            "event list, exact id",
            Box::new(|i| format!("/events?id=evt_{:07}", 13 + 100 * (i % 900))),
            "evt_",
        ),
        (
            "event list, exact id that is not there",
            Box::new(|_| "/events?id=evt_nope".into()),
            "",
        ),
        (
            "event list, last answer 5xx",
            Box::new(|_| "/events?status=5xx".into()),
            "evt_",
        ),
        (
            "event list, last answer 429",
            Box::new(|_| "/events?status=429".into()),
            "evt_",
        ),
        (
            "event list, last answer timeout",
            Box::new(|_| "/events?status=timeout".into()),
            "evt_",
        ),
        (
            "event list, last answer matching nothing (418)",
            Box::new(|_| "/events?status=418".into()),
            "",
        ),
        (
            "event list, failed to one endpoint",
            Box::new(move |_| format!("/events?state=failed&endpoint={ep_failed}")),
            "evt_",
        ),
        (
            "event list, a custom 5-minute range",
            Box::new(move |_| format!("/events?from={from}&to={to}")),
            "evt_",
        ),
        ("event detail", Box::new(detail), "attempt"),
    ];
    let mut figures = Vec::new();
    for (name, path, expect) in pages {
        let mut samples = Vec::new();
        for i in 0..220 {
            let t = Instant::now();
            let res = web
                .get(format!("{}{}", node.base, path(i)))
                .send()
                .await
                .unwrap();
            let status = res.status();
            let body = res.text().await.unwrap();
            let took = t.elapsed();
            assert_eq!(status, 200, "{name}: {}", path(i));
            assert!(body.contains(expect), "{name}: the page lacks {expect:?}");
            // The first requests warm caches and connections.
            if i >= 20 {
                samples.push(took);
            }
        }
        let s = spread(samples);
        eprintln!("  {name}: p50 {:?} p95 {:?}", s.p50, s.p95);
        figures.push((name, s));
    }
    node.stop().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    db.finish().await;
    Figures {
        seed_secs,
        pages: figures,
    }
}
