//! Accounts, endpoints and queues for the runs, written through the store
//! the way ingest writes them (the dashboard's million rows excepted).

use std::time::Duration;

use dakghar::{
    auth::{api_key, password},
    clock::{Clock, SystemClock, Timestamp},
    store::{Account, AttemptRecord, Delivery, NewEndpoint, NewEvent, Role, Store},
};

pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
pub const EMAIL: &str = "bench@dakghar.test";
pub const PASSWORD: &str = "bench password";

/// A ~1 KB JSON body, like a typical webhook.
pub fn payload(n: usize) -> Vec<u8> {
    format!(r#"{{"n":{n},"data":"{}"}}"#, "x".repeat(1000)).into_bytes()
}

pub async fn account(store: &Store, endpoints: usize, url: &str, max_in_flight: i64) -> Account {
    let now = SystemClock.now();
    let name = format!("bench-{}", dakghar::ids::random_token(8));
    let account = store.create_account(&name, now).await.unwrap();
    for _ in 0..endpoints {
        store
            .create_endpoint(
                NewEndpoint {
                    account_id: account.id.clone(),
                    url: url.to_string(),
                    description: String::new(),
                    event_types: vec![],
                    secret: SECRET.into(),
                    rate_limit_per_sec: None,
                    max_in_flight,
                    retry_strategy: None,
                    retry_statuses: None,
                },
                now,
            )
            .await
            .unwrap();
    }
    account
}

/// An API key for the account; returns the key itself.
pub async fn key(store: &Store, account: &Account) -> String {
    let k = api_key::generate();
    store
        .create_api_key(
            &account.id,
            "",
            &k.prefix,
            &k.hash,
            false,
            SystemClock.now(),
        )
        .await
        .unwrap();
    k.key
}

pub async fn user(store: &Store, account: &Account) {
    let hash = password::hash(PASSWORD).unwrap();
    store
        .create_user(&account.id, EMAIL, &hash, Role::Member, SystemClock.now())
        .await
        .unwrap();
}

/// Queues `events` events from 16 producers at once, as ingest does.
pub async fn queue(store: &Store, account_id: &str, events: usize, tag: &str) {
    const PRODUCERS: usize = 16;
    let mut producers = Vec::new();
    for p in 0..PRODUCERS {
        let (store, account_id, tag) = (store.clone(), account_id.to_string(), tag.to_string());
        producers.push(tokio::spawn(async move {
            for i in (p..events).step_by(PRODUCERS) {
                let now = SystemClock.now();
                let event = || NewEvent {
                    account_id: account_id.clone(),
                    id: format!("{tag}_{i:07}"),
                    event_type: "invoice.paid".into(),
                    payload: payload(i),
                };
                // As a producer does: the file's write lock may be the
                // server's (its claims) for longer than the busy timeout.
                loop {
                    let give_up = now.plus(Duration::from_secs(72 * 3600));
                    match store.insert_event(event(), now, give_up).await {
                        Err(e) if e.is_unavailable() => {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        r => {
                            r.unwrap();
                            break;
                        }
                    }
                }
            }
        }));
    }
    for p in producers {
        p.await.unwrap();
    }
}

/// What a 204 attempt leaves behind.
pub fn attempt_record(d: &Delivery, now: Timestamp) -> AttemptRecord {
    AttemptRecord {
        attempt: d.attempt_seq + 1,
        started_at: now.millis(),
        duration_ms: 1,
        request_headers: r#"{"content-type":"application/json"}"#.into(),
        response_status: Some(204),
        response_headers: Some("{}".into()),
        response_body: Some(Vec::new()),
        error: None,
        classification: "delivered".into(),
    }
}
