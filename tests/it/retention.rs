//! Retention on both backends: only finished history older than the
//! period goes, archived first; pending work and recent history stay.

use std::time::Duration;

use base64::Engine as _;
use dakghar::{
    clock::Clock,
    jobs::retention::{run_once, RetentionSettings},
    store::{DeliveryState, Store},
};
use reqwest::Method;
use serde_json::{json, Value};

use crate::{api_client::Api, helpers::StateOf, receiver::Receiver};

on_both_backends!(retention_deletes_only_old_finished_history_and_archives_it_first);

async fn retention_deletes_only_old_finished_history_and_archives_it_first(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint_with(&rx, json!({ "event_types": ["t", "both"] }))
        .await;
    let held = api
        .endpoint_with(&rx, json!({ "event_types": ["held", "both"] }))
        .await;
    let (s, _) = api
        .call(
            Method::POST,
            &format!("/api/v1/endpoints/{}/pause", held["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert!(s.is_success());

    rx.script(&[200, 400]);
    let send = |id: &'static str, ty: &'static str| {
        api.send(json!({ "id": id, "type": ty, "payload": { "secret_sauce": id } }))
    };
    send("old_delivered", "t").await;
    api.tick().await;
    send("old_failed", "t").await;
    api.tick().await;
    send("old_pending", "held").await;
    send("old_mixed", "both").await;
    send("old_orphan", "nobody").await;
    while api.tick().await > 0 {}

    api.advance(Duration::from_secs(91 * 24 * 3600));
    send("new_delivered", "t").await;
    send("new_orphan", "nobody").await;
    while api.tick().await > 0 {}

    let dir = tempfile::tempdir().unwrap();
    let settings = RetentionSettings {
        keep: Some(Duration::from_secs(90 * 24 * 3600)),
        archive_dir: Some(dir.path().join("archive")),
        ..RetentionSettings::default()
    };
    let store = &api.app.store;
    let purged = run_once(store, &settings, api.app.clock.now())
        .await
        .unwrap();
    assert_eq!(
        (purged.deliveries, purged.events, purged.archived),
        (3, 3, 3),
        "{purged:?}"
    );

    let account = store.list_accounts().await.unwrap()[0].id.clone();
    let exists = |id: &'static str| {
        let store = store.clone();
        let account = account.clone();
        async move { store.event(&account, id).await.is_ok() }
    };
    for gone in ["old_delivered", "old_failed", "old_orphan"] {
        assert!(!exists(gone).await, "{gone} should be deleted");
    }
    for kept in ["old_pending", "old_mixed", "new_delivered", "new_orphan"] {
        assert!(exists(kept).await, "{kept} should be kept");
    }
    let mixed = store
        .deliveries_of_event(&account, "old_mixed")
        .await
        .unwrap();
    assert_eq!(
        mixed.len(),
        1,
        "the finished half went, the pending half stayed"
    );
    assert_eq!(mixed[0].state(), Some(DeliveryState::Pending));
    assert_eq!(
        store
            .count_deliveries(DeliveryState::Pending)
            .await
            .unwrap(),
        2
    );

    let archive = std::fs::read_dir(dir.path().join("archive"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(archive).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    // Attempts go with their delivery (by hand on Postgres, where nothing
    // cascades to them: migration 0022).
    let with_deliveries = lines
        .iter()
        .filter_map(|l| Some((l, l["delivery_id"].as_str()?)));
    assert_eq!(with_deliveries.clone().count(), 3, "{lines:?}");
    for (line, id) in with_deliveries {
        assert!(!line["attempts"].as_array().unwrap().is_empty(), "{line}");
        assert_eq!(
            store.attempts_of_delivery(id).await.unwrap().len(),
            0,
            "the attempts of {id}"
        );
    }
    let failed = lines
        .iter()
        .find(|l| l["event"]["id"] == "old_failed")
        .expect("archived");
    assert_eq!(failed["state"], "failed");
    assert_eq!(failed["attempts"][0]["status"], 400);
    let payload = base64::engine::general_purpose::STANDARD
        .decode(failed["event"]["payload_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(payload, br#"{"secret_sauce":"old_failed"}"#);

    let again = run_once(store, &settings, api.app.clock.now())
        .await
        .unwrap();
    assert_eq!(
        (again.deliveries, again.events),
        (0, 0),
        "nothing more to do"
    );
    let off = RetentionSettings {
        keep: None,
        ..RetentionSettings::default()
    };
    api.advance(Duration::from_secs(365 * 24 * 3600));
    let kept = run_once(store, &off, api.app.clock.now()).await.unwrap();
    assert_eq!(kept.deliveries, 0, "off keeps everything");
}
