//! What an operator relies on: every metric from the first second, a
//! readiness answer that means something, and the operator commands.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use dakghar::{clock::Timestamp, config::ServeConfig, store::postgres::PING_IF_IDLE_FOR};
use reqwest::StatusCode;

use crate::{
    helpers::{spawn_app_with, Raw, TestDb, TEST_SECRETS_KEY},
    served::{free_port, Served, BIN},
    tcp_proxy::TcpProxy,
};

on_both_backends_db!(
    every_metric_is_there_at_zero_before_the_first_attempt,
    readyz_says_503_while_migrations_are_pending_or_the_database_is_away,
    status_names_the_queue_the_dead_letters_and_each_node_with_what_it_holds,
    an_account_exports_as_json_lines_in_the_archive_format,
);

fn dakghar(db: &str, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .env_remove("DATABASE_URL")
        .env("DAKGHAR_DATABASE_URL", db)
        .env("DAKGHAR_SECRETS_KEY", TEST_SECRETS_KEY)
        .env("RUST_LOG", "off")
        .output()
        .expect("run dakghar")
}

/// A fresh process (the recorder is global: a test process has recorded
/// plenty already): each metric family it describes has samples at once.
async fn every_metric_is_there_at_zero_before_the_first_attempt(db: &TestDb) {
    let port = free_port();
    let _server = Served(
        Command::new(BIN)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .env_remove("DATABASE_URL")
            .env("DAKGHAR_DATABASE_URL", db.process_url())
            .env("DAKGHAR_SECRETS_KEY", TEST_SECRETS_KEY)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dakghar serve"),
    );
    let url = format!("http://127.0.0.1:{port}/metrics");
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        if let Ok(res) = reqwest::get(&url).await {
            break res.text().await.unwrap();
        }
        assert!(Instant::now() < deadline, "the server never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# HELP "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert!(families.len() >= 19, "{text}");
    for family in &families {
        let sampled = text
            .lines()
            .any(|l| !l.starts_with('#') && l.starts_with(family));
        assert!(
            sampled,
            "{family} has no series before the first attempt:\n{text}"
        );
    }
    for series in [
        r#"dakghar_attempts_total{outcome="permanent",status_class="4xx"} 0"#,
        r#"dakghar_dead_lettered_total{reason="expired"} 0"#,
        "dakghar_retries_total 0",
        "dakghar_request_seconds_count 0",
        "dakghar_db_ingest_seconds_count 0",
    ] {
        assert!(text.lines().any(|l| l == series), "{series} in:\n{text}");
    }
}

async fn readyz_says_503_while_migrations_are_pending_or_the_database_is_away(db: &TestDb) {
    let app = spawn_app_with(db.store.clone(), ServeConfig::for_tests()).await;
    let readyz = || async {
        let res = reqwest::get(app.url("/readyz")).await.unwrap();
        (res.status(), res.text().await.unwrap())
    };
    assert_eq!(readyz().await.0, StatusCode::OK);
    let raw = db.raw().await;
    let exec = |sql: &'static str| {
        let raw = &raw;
        async move {
            match raw {
                Raw::Sqlite(c) => drop(sqlx::query(sql).execute(c).await.unwrap()),
                Raw::Postgres(c) => drop(sqlx::query(sql).execute(c).await.unwrap()),
            }
        }
    };
    // As if this node were newer than the database it was pointed at.
    exec("UPDATE _sqlx_migrations SET success = false WHERE version = 19").await;
    let (status, why) = readyz().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(why.contains("migrations pending: 0019"), "{why}");
    assert_eq!(
        reqwest::get(app.url("/healthz")).await.unwrap().status(),
        StatusCode::OK,
        "still alive"
    );
    exec("UPDATE _sqlx_migrations SET success = true WHERE version = 19").await;
    assert_eq!(readyz().await.0, StatusCode::OK);

    // Postgres can go away under a running node.
    let Some(addr) = db.postgres_addr().await else {
        return;
    };
    let proxy = TcpProxy::start(addr).await;
    let through = db.postgres_store_at(proxy.addr).await.unwrap();
    let node = spawn_app_with(through, ServeConfig::for_tests()).await;
    let readyz = || async { reqwest::get(node.url("/readyz")).await.unwrap().status() };
    assert_eq!(readyz().await, StatusCode::OK);
    proxy.cut();
    assert_eq!(readyz().await, StatusCode::SERVICE_UNAVAILABLE);
    proxy.restore();
    let deadline = Instant::now() + Duration::from_secs(20);
    while readyz().await != StatusCode::OK {
        assert!(
            Instant::now() < deadline,
            "ready again once the database is back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A node whose receiver never answers holds its deliveries in flight:
/// status shows them against that node, and the queue and dead letters.
async fn status_names_the_queue_the_dead_letters_and_each_node_with_what_it_holds(db: &TestDb) {
    let rx = crate::receiver::Receiver::start().await;
    rx.delay(Duration::from_secs(60));
    let key = crate::served::tenant(&db.store, &rx.url, 3).await;
    let url = db.process_url();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let _server = Served(
        Command::new(BIN)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--allow-subnets", "127.0.0.1/32", "--retention", "off"])
            .env_remove("DATABASE_URL")
            .env("DAKGHAR_DATABASE_URL", &url)
            .env("DAKGHAR_SECRETS_KEY", TEST_SECRETS_KEY)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dakghar serve"),
    );
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    for n in 0..5 {
        loop {
            let res = http
                .post(format!("{base}/api/v1/events"))
                .bearer_auth(&key)
                .json(&serde_json::json!({ "type": "t", "payload": { "n": n } }))
                .send()
                .await;
            if matches!(&res, Ok(r) if r.status() == StatusCode::ACCEPTED) {
                break;
            }
            assert!(Instant::now() < deadline, "the server never took events");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // max_in_flight 3: three held by the node, two waiting.
    let deadline = Instant::now() + Duration::from_secs(20);
    while rx.open() < 3 {
        assert!(Instant::now() < deadline, "three requests held open");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A second endpoint, made after the events so it holds none, paused.
    let created: serde_json::Value = http
        .post(format!("{base}/api/v1/endpoints"))
        .bearer_auth(&key)
        .json(&serde_json::json!({ "url": format!("{}/second", rx.url) }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().expect("an endpoint id");
    let paused = http
        .post(format!("{base}/api/v1/endpoints/{id}/pause"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert!(paused.status().is_success(), "{paused:?}");
    let out = dakghar(&url, &["status", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["pending"], 2, "{status}");
    assert_eq!(status["in_flight"], 3, "{status}");
    assert_eq!(status["dead_letters_24h"], 0);
    assert_eq!(status["endpoints_paused"], 1, "{status}");
    assert_eq!(status["circuits_open"], 0, "{status}");
    let nodes = status["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{status}");
    assert_eq!(nodes[0]["alive"], true);
    assert_eq!(nodes[0]["role"], "all");
    assert_eq!(nodes[0]["in_flight"], 3, "{status}");
    let text = dakghar(&url, &["status"]);
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(text.contains("2 pending, 3 in flight"), "{text}");
    assert!(text.contains("3 in flight\n"), "the node's line: {text}");
    assert!(text.contains("0 circuits open, 1 paused"), "{text}");
}

async fn an_account_exports_as_json_lines_in_the_archive_format(db: &TestDb) {
    use dakghar::{
        clock::{Clock, Timestamp},
        store::NewEvent,
    };
    let now = dakghar::clock::SystemClock.now();
    let account = db.store.create_account("acme", now).await.unwrap();
    let other = db.store.create_account("other", now).await.unwrap();
    db.store
        .create_endpoint(
            crate::helpers::new_endpoint(&account.id, "https://a.example/", &["t"]),
            now,
        )
        .await
        .unwrap();
    let event = |acc: &str, id: &str, ty: &str| NewEvent {
        account_id: acc.to_string(),
        id: id.to_string(),
        event_type: ty.to_string(),
        payload: br#"{"n":1}"#.to_vec(),
    };
    let window = now.plus(Duration::from_secs(3600));
    for (i, (id, ty)) in [("e1", "t"), ("e2", "unwanted"), ("e3", "t")]
        .iter()
        .enumerate()
    {
        let at = Timestamp(now.millis() + i as i64 * 1000);
        db.store
            .insert_event(event(&account.id, id, ty), at, window)
            .await
            .unwrap();
    }
    db.store
        .insert_event(event(&other.id, "x1", "t"), now, window)
        .await
        .unwrap();
    let url = db.process_url();
    let out = dakghar(&url, &["events", "export", "--account", "acme"]);
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&str> = lines
        .iter()
        .map(|l| l["event"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["e1", "e2", "e3"], "oldest first, this account only");
    // The archive's keys; an event no endpoint wanted has no delivery.
    for key in [
        "account_id",
        "delivery_id",
        "endpoint_id",
        "state",
        "created_at",
        "finished_at",
        "last_error",
        "event",
        "attempts",
    ] {
        assert!(lines[0].get(key).is_some(), "{key} in {}", lines[0]);
    }
    assert_eq!(lines[0]["state"], "pending");
    assert_eq!(lines[0]["event"]["payload_base64"], "eyJuIjoxfQ==");
    assert!(lines[1]["delivery_id"].is_null(), "{}", lines[1]);
    let since = Timestamp(now.millis() + 1000).to_rfc3339();
    let until = Timestamp(now.millis() + 2000).to_rfc3339();
    let out = dakghar(
        &url,
        &[
            "events",
            "export",
            "--account",
            "acme",
            "--since",
            &since,
            "--until",
            &until,
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains(r#""id":"e2""#), "{text}");
    let bad = dakghar(
        &url,
        &[
            "events",
            "export",
            "--account",
            "acme",
            "--since",
            "yesterday",
        ],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("RFC 3339"));
}

/// `config check` changes nothing, masks what is secret, and names every
/// problem with a non-zero exit.
#[test]
fn config_check_reports_without_changing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("fresh.db").display());
    let site = dir.path().join("site");
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    for file in ["dakghar.js", "dakghar.wasm", "dakghar.css"] {
        std::fs::write(site.join("pkg").join(file), "built").unwrap();
    }
    let site = site.display().to_string();
    // `config check` on the fresh database, with `flags` added.
    let check = |flags: &[&str]| {
        Command::new(BIN)
            .args(["config", "check", "--site-root", &site])
            .args(flags)
            .env_remove("DATABASE_URL")
            .env("DAKGHAR_DATABASE_URL", &db)
            .env("DAKGHAR_SECRETS_KEY", TEST_SECRETS_KEY)
            .output()
            .unwrap()
    };
    let out = check(&[
        "--smtp-url",
        "smtps://mailer:hunter2@mail.example:465",
        "--otlp-endpoint",
        "http://otel:otel-pass@collector.example:4318",
        "--egress-proxy",
        "http://proxy-user:proxy-pass@proxy.example:3128",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("migrations pending"),
        "a fresh database: {text}"
    );
    assert!(text.contains("ok: serve would start"), "{text}");
    assert!(
        text.contains("database pool                16 connections"),
        "the default pool: {text}"
    );
    assert!(text.contains("collector.example:4318"), "{text}");
    for secret in ["hunter2", "proxy-pass", "otel-pass", TEST_SECRETS_KEY] {
        assert!(!text.contains(secret), "{secret} shown:\n{text}");
    }
    assert!(text.contains("****"), "{text}");
    // Nothing was migrated or created by the check.
    let still = check(&[]);
    assert!(String::from_utf8_lossy(&still.stdout).contains("migrations pending"));
    let sized = check(&["--database-pool", "9"]);
    let sized = String::from_utf8_lossy(&sized.stdout).to_string();
    assert!(
        sized.contains("database pool                9 connections"),
        "the flag's pool: {sized}"
    );
    assert!(!dir.path().join("secrets.key").exists());

    let out = Command::new(BIN)
        .args([
            "config",
            "check",
            "--site-root",
            "/nowhere",
            "--secrets-key",
            "short",
        ])
        .env_remove("DATABASE_URL")
        .env("DAKGHAR_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    for problem in [
        "database:",
        "--secrets-key",
        "folder /nowhere): pkg/dakghar.js, pkg/dakghar.wasm, pkg/dakghar.css missing",
    ] {
        assert!(err.contains(problem), "{problem} in:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

/// Pooled connections just used are handed out without a ping (a round
/// trip on every hot-path statement); one that Postgres dropped while it
/// sat idle is still found out and replaced before a caller gets it.
#[tokio::test]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn a_postgres_connection_dropped_while_idle_is_replaced_before_use() {
    let db = TestDb::postgres().await;
    let proxy = TcpProxy::start(db.postgres_addr().await.unwrap()).await;
    let store = db.postgres_store_at(proxy.addr).await.unwrap();
    store
        .create_account("before", Timestamp(1))
        .await
        .expect("through the proxy");
    // Every open connection dies; the proxy takes new ones at once.
    proxy.cut();
    proxy.restore();
    tokio::time::sleep(PING_IF_IDLE_FOR + Duration::from_millis(200)).await;
    store
        .create_account("after", Timestamp(2))
        .await
        .expect("a live connection, not the dropped one");
    store.close().await;
    db.finish().await;
}
