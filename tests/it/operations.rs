//! What an operator relies on: every metric from the first second, a
//! readiness answer that means something, and the operator commands.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use dakghar::config::ServeConfig;
use reqwest::StatusCode;

use crate::{
    helpers::{spawn_app_with, Raw, TestDb, TEST_SECRETS_KEY},
    served::{free_port, Served, BIN},
    tcp_proxy::TcpProxy,
};

on_both_backends_db!(
    every_metric_is_there_at_zero_before_the_first_attempt,
    readyz_says_503_while_migrations_are_pending_or_the_database_is_away,
);

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
