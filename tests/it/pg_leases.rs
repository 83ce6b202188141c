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

/// A lease from `now`, for the usual 300 s, of up to `limit` deliveries,
/// under no installation-wide rate limit or host cap.
fn lease_terms(now: Timestamp, limit: i64) -> LeaseTerms {
    LeaseTerms {
        now,
        lease_until: now.plus(Duration::from_secs(300)),
        limit,
        rules: ClaimRules::default(),
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

    let terms = lease_terms(now, 100);
    let lease_until = terms.lease_until;
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
    let after = store
        .claim(now, lease_until, 100, terms.rules)
        .await
        .unwrap();
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
    let terms = lease_terms(now, 100);
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

/// Ingest groups on two nodes at once, each leasing for the same
/// endpoint: its in-flight cap holds across all of them (each lease
/// counts the endpoint's slots under its lock, held to the commit), no
/// delivery is leased twice, and what they left pending a claim then
/// takes up to the cap exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn ingest_leases_on_two_nodes_keep_one_endpoints_cap() {
    const CAP: usize = 3;
    const GROUPS: usize = 24;
    let db = TestDb::postgres().await;
    let now = TestClock::starting_now().now();
    let account = db.store.create_account("raced", now).await.unwrap();
    let mut ep = new_endpoint(&account.id, "https://raced.example/", &[]);
    ep.max_in_flight = CAP as i64;
    db.store.create_endpoint(ep, now).await.unwrap();
    let nodes = [db.store.clone(), db.another_node().await];
    let terms = lease_terms(now, 100);
    let lease_until = terms.lease_until;
    let groups = (0..GROUPS).map(|i| {
        let (node, account) = (nodes[i % 2].clone(), account.id.clone());
        tokio::spawn(async move {
            let (inserted, claim) = node
                .insert_events_leasing(&[ingest(&account, &format!("evt_{i}"), now)], Some(terms))
                .await
                .unwrap();
            assert!(inserted[0].is_ok(), "{inserted:?}");
            claim.deliveries
        })
    });
    let mut leased = Vec::new();
    for group in groups.collect::<Vec<_>>() {
        leased.extend(group.await.unwrap());
    }
    let mut ids: Vec<&str> = leased.iter().map(|d| d.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), leased.len(), "no delivery leased twice");
    assert!(
        (1..=CAP).contains(&leased.len()),
        "at least the first group leased, and never past the cap: {}",
        leased.len()
    );
    let count = |state| {
        let store = db.store.clone();
        async move { store.count_deliveries(state).await.unwrap() as usize }
    };
    assert_eq!(
        (
            count(DeliveryState::InFlight).await,
            count(DeliveryState::Pending).await
        ),
        (leased.len(), GROUPS - leased.len()),
        "as stored: what was leased in flight, the rest pending"
    );
    let rest = db
        .store
        .claim(now, lease_until, 100, terms.rules)
        .await
        .unwrap();
    assert_eq!(
        (rest.deliveries.len(), rest.held_back),
        (CAP - leased.len(), true),
        "a claim fills the cap and holds the rest back"
    );
    db.finish().await;
}

/// A group whose account's endpoints changed on another node since this
/// node read them is written in a second pass, from a fresh read: its
/// events reach the new endpoint too, and the lease's limit is spent
/// across both passes (an account still as read goes in the first), the
/// longest-waiting work first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn a_group_written_again_for_a_changed_account_leases_within_its_limit() {
    let db = TestDb::postgres().await;
    let now = TestClock::starting_now().now();
    let later = now.plus(Duration::from_millis(5));
    let store = &db.store;
    let steady = store.create_account("steady", now).await.unwrap();
    let changing = store.create_account("changing", now).await.unwrap();
    let endpoint = |account: &str, url: &str| {
        let ep = new_endpoint(account, url, &[]);
        async move { store.create_endpoint(ep, now).await.unwrap() }
    };
    let steady_ep = endpoint(&steady.id, "https://steady.example/").await;
    let first = endpoint(&changing.id, "https://first.example/").await;
    // This node reads and keeps both accounts' fan-outs; s0 comes due
    // only in an hour.
    store
        .insert_events(&[
            ingest(&changing.id, "waiting", now),
            ingest(&steady.id, "s0", now.plus(Duration::from_secs(3600))),
        ])
        .await
        .unwrap();
    let second = db
        .another_node()
        .await
        .create_endpoint(
            new_endpoint(&changing.id, "https://second.example/", &[]),
            now,
        )
        .await
        .unwrap();
    let terms = lease_terms(later, 3);
    let batch = [
        ingest(&steady.id, "s1", later),
        ingest(&changing.id, "a", later),
        ingest(&changing.id, "b", later),
    ];
    let (inserted, claim) = store
        .insert_events_leasing(&batch, Some(terms))
        .await
        .unwrap();
    let mut both = vec![first.id.as_str(), second.id.as_str()];
    both.sort();
    for answer in &inserted[1..] {
        let answer = answer.as_ref().unwrap();
        let mut to: Vec<&str> = answer
            .deliveries
            .iter()
            .map(|d| d.endpoint_id.as_str())
            .collect();
        to.sort();
        assert_eq!(to, both, "{} reaches the new endpoint too", answer.event.id);
    }
    let mut leased: Vec<(&str, &str)> = claim
        .deliveries
        .iter()
        .map(|d| (d.event_id.as_str(), d.endpoint_id.as_str()))
        .collect();
    leased.sort();
    // a and b were made in the same millisecond: either goes first.
    let new_one = leased.first().map_or("", |(event, _)| *event);
    assert!(["a", "b"].contains(&new_one), "{leased:?}");
    assert_eq!(
        leased,
        [
            (new_one, first.id.as_str()),
            ("s1", steady_ep.id.as_str()),
            ("waiting", first.id.as_str()),
        ],
        "three in all: the steady account's in the first pass, then the \
         changed one's older waiting delivery and one new one"
    );
    let count = |state| async move { store.count_deliveries(state).await.unwrap() };
    assert_eq!(
        (
            count(DeliveryState::InFlight).await,
            count(DeliveryState::Pending).await
        ),
        (3, 4),
        "the three leased in flight; s0, b's two and a's second pending"
    );
    db.finish().await;
}
