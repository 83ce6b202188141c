//! Alert tiers at the right clock times, once each, reset on recovery; and
//! the outbox sent to a real local SMTP server, retried when it refuses.

use std::time::Duration;

use dakghar::{
    clock::Clock,
    config::ServeConfig,
    jobs::{
        alerts::evaluate,
        mailer::{MailSettings, Mailer},
    },
    store::Store,
};
use serde_json::json;

use crate::{api_client::Api, receiver::Receiver, smtp_sink::SmtpSink};

on_both_backends!(
    alert_tiers_fire_once_each_at_their_time_and_reset_on_recovery,
    the_outbox_is_emailed_and_retried_when_smtp_refuses,
    the_expiry_warning_is_once_per_failing_spell,
    no_failing_alert_for_a_quiet_or_a_paused_endpoint,
);

/// The public URL the alerts' links start with.
const BASE: &str = "https://hooks.example.com";

async fn the_expiry_warning_is_once_per_failing_spell(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    let id = ep["id"].as_str().unwrap();
    let s = &api.app.store;
    assert!(s.mark_expiry_warned(id, 1_000).await.unwrap());
    assert!(
        !s.mark_expiry_warned(id, 2_000).await.unwrap(),
        "the next oldest does not warn again"
    );
    s.endpoint_succeeded(id, api.app.clock.now()).await.unwrap();
    assert!(
        s.mark_expiry_warned(id, 3_000).await.unwrap(),
        "a new spell after a success"
    );
}

const MIN: u64 = 60;

async fn kinds(api: &Api, account_id: &str) -> Vec<String> {
    let mut notes = api.app.store.notifications(account_id).await.unwrap();
    notes.sort_by_key(|n| (n.created_at, n.id.clone()));
    notes.into_iter().map(|n| n.kind).collect()
}

/// Advances the clock in steps, letting the engine retry as it goes.
async fn run_for(api: &Api, total: Duration, step: Duration) {
    let mut passed = Duration::ZERO;
    while passed < total {
        api.advance(step);
        passed += step;
        while api.tick().await > 0 {}
    }
}

async fn alert_tiers_fire_once_each_at_their_time_and_reset_on_recovery(store: Store) {
    let mut config = ServeConfig::for_tests();
    // Only the 72 h window ends the retries here.
    config.delivery.max_attempts = 1000;
    let api = Api::with_config(store, config).await;
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    rx.script(&[500; 200]);
    let sent = api
        .send(json!({ "id": "evt_doomed", "type": "t", "payload": {} }))
        .await;
    api.tick().await;
    let account = api.delivery(&sent).await.account_id;
    let store = api.app.store.clone();
    let now = |api: &Api| api.app.clock.now();

    assert_eq!(evaluate(&store, now(&api), BASE).await.unwrap(), 0);
    run_for(
        &api,
        Duration::from_secs(59 * MIN),
        Duration::from_secs(59 * MIN),
    )
    .await;
    assert_eq!(
        evaluate(&store, now(&api), BASE).await.unwrap(),
        0,
        "not yet an hour"
    );
    run_for(
        &api,
        Duration::from_secs(2 * MIN),
        Duration::from_secs(2 * MIN),
    )
    .await;
    assert_eq!(
        evaluate(&store, now(&api), BASE).await.unwrap(),
        1,
        "failing for an hour"
    );
    assert_eq!(evaluate(&store, now(&api), BASE).await.unwrap(), 0, "once");
    assert_eq!(kinds(&api, &account).await, ["failing"]);
    let body = store.notifications(&account).await.unwrap()[0].body.clone();
    let ep_id = ep["id"].as_str().unwrap();
    for part in [
        "the last answer was HTTP 500",
        "gives up in about 70 hours",
        "The latest events that failed: evt_doomed.",
        &format!("The endpoint: {BASE}/endpoints/{ep_id}"),
        &format!("Its failed events: {BASE}/events?state=failed&endpoint={ep_id}"),
    ] {
        assert!(
            body.contains(part),
            "{part:?} in the failing alert:\n{body}"
        );
    }

    run_for(
        &api,
        Duration::from_secs(23 * 3600),
        Duration::from_secs(3600),
    )
    .await;
    assert_eq!(
        evaluate(&store, now(&api), BASE).await.unwrap(),
        1,
        "again at a day"
    );
    assert_eq!(evaluate(&store, now(&api), BASE).await.unwrap(), 0);
    let notes = store.notifications(&account).await.unwrap();
    assert!(notes
        .iter()
        .any(|n| n.subject.ends_with("has been failing for a day")));

    // 72 h after ingest the delivery gives up; an hour before, a warning.
    run_for(
        &api,
        Duration::from_secs(46 * 3600),
        Duration::from_secs(3600),
    )
    .await;
    assert_eq!(
        evaluate(&store, now(&api), BASE).await.unwrap(),
        0,
        "more than an hour left"
    );
    run_for(
        &api,
        Duration::from_secs(59 * MIN),
        Duration::from_secs(59 * MIN),
    )
    .await;
    assert_eq!(
        evaluate(&store, now(&api), BASE).await.unwrap(),
        1,
        "about to expire"
    );
    assert_eq!(evaluate(&store, now(&api), BASE).await.unwrap(), 0);
    assert_eq!(
        kinds(&api, &account).await,
        ["failing", "failing", "expiry_warning"]
    );

    run_for(
        &api,
        Duration::from_secs(60 * MIN),
        Duration::from_secs(60 * MIN),
    )
    .await;
    let d = api.delivery(&sent).await;
    assert_eq!(d.state.as_str(), "expired");
    assert_eq!(
        evaluate(&store, now(&api), BASE).await.unwrap(),
        0,
        "the summary waits for the wave to end"
    );
    api.advance(Duration::from_secs(11 * MIN));
    assert_eq!(
        evaluate(&store, now(&api), BASE).await.unwrap(),
        1,
        "a summary of what expired"
    );
    assert_eq!(evaluate(&store, now(&api), BASE).await.unwrap(), 0);
    let summary = store
        .notifications(&account)
        .await
        .unwrap()
        .into_iter()
        .find(|n| n.kind == "expired_summary")
        .unwrap();
    assert!(
        summary.body.contains("evt_doomed") && summary.body.contains("HTTP 500"),
        "{}",
        summary.body
    );
    assert_eq!(summary.endpoint_id.as_deref(), ep["id"].as_str());

    // Recovery resets the tier: the next failing spell alerts again.
    rx.clear_script();
    api.send(json!({ "type": "t", "payload": {} })).await;
    let before = kinds(&api, &account).await.len();
    // Past the circuit breaker's longest cooldown.
    run_for(
        &api,
        Duration::from_secs(61 * MIN),
        Duration::from_secs(61 * MIN),
    )
    .await;
    let e = store
        .endpoint_by_id(ep["id"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!((e.alert_level, e.failing_since), (0, None));
    rx.script(&[500; 200]);
    api.send(json!({ "type": "t", "payload": {} })).await;
    api.tick().await;
    run_for(
        &api,
        Duration::from_secs(61 * MIN),
        Duration::from_secs(61 * MIN),
    )
    .await;
    assert_eq!(evaluate(&store, now(&api), BASE).await.unwrap(), 1);
    assert_eq!(kinds(&api, &account).await.len(), before + 1);
}

async fn the_outbox_is_emailed_and_retried_when_smtp_refuses(store: Store) {
    let api = Api::new(store).await;
    let sink = SmtpSink::start().await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    rx.script(&[410]);
    let sent = api.send(json!({ "type": "t", "payload": {} })).await;
    api.tick().await;
    let account = api.delivery(&sent).await.account_id;
    let hash = dakghar::auth::password::hash("a long enough password").unwrap();
    for email in ["ops@acme.example", "dev@acme.example"] {
        api.app
            .store
            .create_user(
                &account,
                email,
                &hash,
                dakghar::store::Role::Member,
                api.app.clock.now(),
            )
            .await
            .unwrap();
    }
    let mailer = Mailer::new(&MailSettings {
        smtp_url: sink.url(),
        from: "Dakghar <alerts@dakghar.test>".into(),
        every: Duration::from_secs(10),
        support: Some("support@platform.example".into()),
    })
    .unwrap();

    sink.refuse_next(1);
    let first = mailer
        .send_due(&api.app.store, api.app.clock.now())
        .await
        .unwrap();
    assert_eq!((first.sent, first.failed), (0, 1));
    let n = &api.app.store.notifications(&account).await.unwrap()[0];
    assert_eq!((n.sent_at, n.send_attempts), (None, 1));
    assert!(
        n.last_send_error.as_deref().unwrap().contains("451"),
        "{:?}",
        n.last_send_error
    );
    let again = mailer
        .send_due(&api.app.store, api.app.clock.now())
        .await
        .unwrap();
    assert_eq!(
        (again.sent, again.failed),
        (0, 0),
        "not before its retry time"
    );

    api.advance(Duration::from_secs(61));
    let retried = mailer
        .send_due(&api.app.store, api.app.clock.now())
        .await
        .unwrap();
    assert_eq!((retried.sent, retried.failed), (1, 0));
    let mails = sink.mails();
    assert_eq!(mails.len(), 1);
    assert!(mails[0].from.contains("alerts@dakghar.test"));
    assert_eq!(
        mails[0].to.len(),
        3,
        "every user of the account, and the support copy: {:?}",
        mails[0].to
    );
    assert!(mails[0]
        .to
        .iter()
        .any(|t| t.contains("support@platform.example")));
    assert!(
        !mails[0].data.contains("support@platform.example"),
        "a blind copy: the customer does not see it"
    );
    assert!(
        mails[0].data.contains("Subject: Endpoint paused"),
        "{}",
        mails[0].data
    );
    let n = &api.app.store.notifications(&account).await.unwrap()[0];
    assert!(n.sent_at.is_some());
    let done = mailer
        .send_due(&api.app.store, api.app.clock.now())
        .await
        .unwrap();
    assert_eq!(done.sent, 0, "sent once");
}

async fn no_failing_alert_for_a_quiet_or_a_paused_endpoint(store: Store) {
    let api = Api::new(store).await;
    let store = api.app.store.clone();
    // One old 400, then nothing: the endpoint is quiet, not failing.
    let quiet = Receiver::start().await;
    quiet.script(&[400]);
    api.endpoint_with(&quiet, json!({ "event_types": ["once"] }))
        .await;
    // Failing all along, but the customer paused it.
    let held = Receiver::start().await;
    held.script(&[500; 50]);
    let paused = api
        .endpoint_with(&held, json!({ "event_types": ["held"] }))
        .await;
    let once = api.send(json!({ "type": "once", "payload": {} })).await;
    api.send(json!({ "type": "held", "payload": {} })).await;
    api.tick().await;
    let account = api.delivery(&once).await.account_id;
    let (s, _) = api
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/endpoints/{}/pause", paused["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert!(s.is_success());
    api.advance(Duration::from_secs(3 * 3600));
    while api.tick().await > 0 {}
    assert_eq!(
        evaluate(&store, api.app.clock.now(), BASE).await.unwrap(),
        0,
        "neither is failing now"
    );
    assert!(
        !kinds(&api, &account).await.contains(&"failing".to_string()),
        "no \"we keep retrying\" for either"
    );
}
