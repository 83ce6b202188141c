//! On Postgres every node's claims and ingest groups lease from one
//! queue: each endpoint's slots are counted under its advisory lock
//! (migrations 0033, 0037), which a lease tries and never waits for.

use std::time::Duration;

use dakghar::{
    clock::{Clock, TestClock, Timestamp},
    store::{ClaimRules, DeliveryState, LeaseTerms, NewEvent, NewIngest},
};

use crate::helpers::{new_endpoint, Raw, TestDb};

/// Event `id` of `account`, type `t`, ingested at `now` for every
/// endpoint, retried for an hour.
fn ingest(account: &str, id: &str, now: Timestamp) -> NewIngest {
    NewIngest {
        event: NewEvent {
            account_id: account.to_string(),
            id: id.into(),
            event_type: "t".into(),
            payload: b"{}".to_vec(),
        },
        only: None,
        now,
        give_up_at: now.plus(Duration::from_secs(3600)),
        traceparent: None,
        key_id: None,
    }
}

/// An ingest group whose endpoint is being claimed elsewhere (its lock
/// held by another transaction) passes it over: that endpoint's new
/// delivery waits pending, the group says it held work back and left
/// work due (so its node wakes a claim loop), and its other endpoint's
/// delivery is written in flight under the lease. Once the lock goes,
/// a claim takes the one left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn an_ingest_lease_passes_over_an_endpoint_claimed_elsewhere() {
    let db = TestDb::postgres().await;
    let store = db.store.clone();
    let Raw::Postgres(pool) = db.raw().await else {
        unreachable!("postgres only");
    };
    let now = TestClock::starting_now().now();
    let lease_until = now.plus(Duration::from_secs(300));
    let account = store.create_account("busy", now).await.unwrap();
    let mut endpoints = Vec::new();
    for url in ["https://claimed.example/", "https://free.example/"] {
        let ep = new_endpoint(&account.id, url, &[]);
        endpoints.push(store.create_endpoint(ep, now).await.unwrap());
    }
    let (claimed, free) = (&endpoints[0], &endpoints[1]);
    // The key a claim (and a lease) takes for an endpoint without a host cap.
    let mut elsewhere = pool.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext(current_schema()), hashtext($1))")
        .bind(&claimed.id)
        .execute(&mut *elsewhere)
        .await
        .unwrap();

    let rules = ClaimRules {
        default_rate: 0,
        host_cap: 0,
    };
    let terms = LeaseTerms {
        now,
        lease_until,
        limit: 100,
        rules,
    };
    let (inserted, claim) = store
        .insert_events_leasing(&[ingest(&account.id, "evt_1", now)], Some(terms))
        .await
        .unwrap();
    let inserted = inserted.into_iter().next().unwrap().unwrap();
    let state_to = |id: &str| {
        inserted
            .deliveries
            .iter()
            .find(|d| d.endpoint_id == id)
            .map(|d| d.state)
    };
    assert_eq!(
        (state_to(&claimed.id), state_to(&free.id)),
        (Some(DeliveryState::Pending), Some(DeliveryState::InFlight)),
        "the claimed endpoint's delivery waits; the other's is leased"
    );
    assert_eq!(claim.deliveries.len(), 1);
    assert_eq!(claim.deliveries[0].endpoint_id, free.id);
    assert!(claim.held_back, "the claimed endpoint's work was held back");
    assert!(
        !claim.drained && !inserted.nothing_left_due,
        "it left work due: a claim loop must look"
    );
    assert_eq!(
        claim.read_along.endpoints.keys().collect::<Vec<_>>(),
        [&free.id],
        "the endpoint it leased for, read along"
    );
    let stored: Vec<(String, String, Option<i64>, Option<String>)> = sqlx::query_as(
        "SELECT endpoint_id, state, lease_until, claim_token FROM deliveries ORDER BY state",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        stored,
        [
            (
                free.id.clone(),
                "in_flight".to_string(),
                Some(lease_until.millis()),
                claim.deliveries[0].claim_token.clone()
            ),
            (claimed.id.clone(), "pending".to_string(), None, None),
        ],
        "as written: one row in flight under the lease, one pending"
    );

    elsewhere.commit().await.unwrap();
    let after = store.claim(now, lease_until, 100, rules).await.unwrap();
    assert_eq!(after.deliveries.len(), 1, "a claim takes the one left");
    assert_eq!(after.deliveries[0].endpoint_id, claimed.id);
    db.finish().await;
}

/// The ingest statement commits before its answer is read: an older
/// row it leased that will not decode (a column of the wrong type here)
/// is handed back with everything the lease took, and the events are
/// still answered and stored, as on SQLite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn a_lease_whose_older_rows_will_not_decode_hands_them_back() {
    let db = TestDb::postgres().await;
    let store = db.store.clone();
    let now = TestClock::starting_now().now();
    let account = store.create_account("broken", now).await.unwrap();
    let ep = new_endpoint(&account.id, "https://broken.example/", &[]);
    store.create_endpoint(ep, now).await.unwrap();
    let ingest = |id: &str| ingest(&account.id, id, now);
    store.insert_events(&[ingest("old")]).await.unwrap();
    store
        .execute_script("ALTER TABLE deliveries ALTER COLUMN attempt_seq TYPE numeric")
        .await
        .unwrap();
    let terms = LeaseTerms {
        now,
        lease_until: now.plus(Duration::from_secs(300)),
        limit: 100,
        rules: ClaimRules {
            default_rate: 0,
            host_cap: 0,
        },
    };
    // A node started after the change: the first one's prepared
    // statements would refuse the new row type outright.
    let (inserted, claim) = db
        .another_node()
        .await
        .insert_events_leasing(&[ingest("new")], Some(terms))
        .await
        .expect("the events are answered");
    assert!(inserted[0].is_ok(), "the event is answered: {inserted:?}");
    assert!(claim.deliveries.is_empty(), "nothing to attempt");
    assert!(!claim.drained, "a claim loop must look");
    let Raw::Postgres(pool) = db.raw().await else {
        unreachable!("postgres only");
    };
    let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT event_id, state, claim_token FROM deliveries ORDER BY event_id DESC",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        rows,
        [
            ("old".to_string(), "pending".to_string(), None),
            ("new".to_string(), "pending".to_string(), None),
        ],
        "both handed back, neither left leased"
    );
    db.finish().await;
}
