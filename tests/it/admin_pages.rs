//! The admin pages' server functions: members get 403 on every one, an
//! admin previews, starts, follows and cancels a replay, and the overview
//! counts per account.

use dakghar::{
    auth::password,
    clock::Clock,
    config::ServeConfig,
    store::{Role, Store},
};
use reqwest::StatusCode;
use serde_json::json;

use crate::{
    dashboard_events::{customer, tick_until_idle},
    helpers::{browser, spawn_app_with, PASSWORD},
    receiver::Receiver,
};

on_both_backends!(
    members_get_403_from_every_admin_server_function,
    an_admin_previews_starts_follows_and_cancels_a_replay,
);

async fn members_get_403_from_every_admin_server_function(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    for (f, form) in [
        ("admin_overview", vec![]),
        ("admin_replay_preview", vec![("form[failed]", "on")]),
        ("admin_replay_start", vec![("form[failed]", "on")]),
        ("admin_replay", vec![("id", "rpl_x")]),
        ("admin_replay_cancel", vec![("id", "rpl_x")]),
        ("admin_audit", vec![]),
    ] {
        let (status, body) = ana.call(&app, f, &form).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{f}: {body}");
        let anonymous = browser()
            .post(app.url(&format!("/_fn/{f}")))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED, "{f}");
    }
    let page = ana.web.get(app.url("/admin")).send().await.unwrap();
    assert_eq!(
        page.status(),
        StatusCode::FORBIDDEN,
        "the page itself answers 403"
    );
    let events = ana.web.get(app.url("/events")).send().await.unwrap();
    let html = events.text().await.unwrap();
    assert!(
        !html.contains(r#"href="/admin""#),
        "no admin link for members"
    );
}

async fn an_admin_previews_starts_follows_and_cancels_a_replay(store: Store) {
    let app = spawn_app_with(store, ServeConfig::for_tests()).await;
    let ana = customer(&app, "Acme", "ana@acme.example").await;
    let hash = password::hash(PASSWORD).unwrap();
    app.store
        .create_user(
            &ana.seeded.account.id,
            "root@acme.example",
            &hash,
            Role::Admin,
            app.clock.now(),
        )
        .await
        .unwrap();
    let root = browser();
    root.post(app.url("/login"))
        .form(&[
            ("email", "root@acme.example"),
            ("password", PASSWORD),
            ("next", ""),
        ])
        .send()
        .await
        .unwrap();
    let call = |f: &'static str, form: Vec<(&'static str, String)>| {
        let req = root
            .post(app.url(&format!("/_fn/{f}")))
            .header("accept", "application/json")
            .form(&form);
        async move {
            let res = req.send().await.unwrap();
            (
                res.status(),
                res.json::<serde_json::Value>().await.unwrap_or_default(),
            )
        }
    };

    let rx = Receiver::start().await;
    rx.script(&[400; 4]);
    ana.api(&app, "/api/v1/endpoints", json!({ "url": rx.url }))
        .await;
    for _ in 0..4 {
        ana.api(
            &app,
            "/api/v1/events",
            json!({ "type": "t", "payload": {} }),
        )
        .await;
    }
    tick_until_idle(&app).await;

    let html = root
        .get(app.url("/events"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains(r#"href="/admin""#), "admins see the link");
    let (status, overview) = call("admin_overview", vec![]).await;
    assert_eq!(status, StatusCode::OK, "{overview}");
    let acme = overview["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "Acme")
        .unwrap()
        .clone();
    assert_eq!(
        (acme["dead_letters"].as_i64(), acme["queued"].as_i64()),
        (Some(4), Some(0))
    );
    assert_eq!(overview["dead_letter_rate_1h"], 1.0);

    let (status, bad) = call(
        "admin_replay_preview",
        vec![("form[event_type]", "t".into())],
    )
    .await;
    assert!(!status.is_success());
    assert!(bad.to_string().contains("at least one state"), "{bad}");
    let (_, bad) = call(
        "admin_replay_preview",
        vec![
            ("form[failed]", "on".into()),
            ("form[since]", "last week".into()),
        ],
    )
    .await;
    assert!(bad.to_string().contains("a date such as"), "{bad}");
    let today = chrono::DateTime::from_timestamp_millis(app.clock.now().millis())
        .unwrap()
        .format("%Y-%m-%d")
        .to_string();
    let (status, preview) = call(
        "admin_replay_preview",
        vec![
            ("form[failed]", "on".into()),
            ("form[since]", today.clone()),
            ("form[until]", today),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    assert_eq!(preview[0]["count"], 4);

    let (status, id) = call(
        "admin_replay_start",
        vec![("form[failed]", "on".into()), ("form[window]", "1h".into())],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{id}");
    let id = id.as_str().unwrap().to_string();
    let (_, progress) = call("admin_replay", vec![("id", id.clone())]).await;
    assert_eq!(
        (progress["count"].as_i64(), progress["pending"].as_i64()),
        (Some(4), Some(4))
    );
    assert!(progress["actor"].as_str().unwrap().starts_with("user:"));

    let (status, _) = call("admin_replay_cancel", vec![("id", id.clone())]).await;
    assert_eq!(status, StatusCode::OK);
    let (_, after) = call("admin_replay", vec![("id", id.clone())]).await;
    assert_eq!(
        (after["status"].as_str(), after["failed"].as_i64()),
        (Some("cancelled"), Some(4))
    );
    let (_, log) = call("admin_audit", vec![]).await;
    assert_eq!(log[0]["id"], id.as_str());
}
