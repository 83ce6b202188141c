//! Postgres stores deliveries partitioned by state, with no foreign keys
//! (migration 0022): what the keys kept, the store keeps by hand.

use std::time::Duration;

use dakghar::{
    clock::{Clock, TestClock},
    store::NewEvent,
};

use crate::helpers::{new_endpoint, wait_for_activity, Raw, TestDb};

/// An ingest group that read an endpoint before its deletion began holds
/// it (a key-share lock) until it commits: deleting the endpoint row waits
/// for it, and the deletion's last pass takes the deliveries it wrote.
/// Without the lock the deletion would not wait; without the last pass
/// the delivery would outlive its endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn deleting_an_endpoint_waits_for_an_ingest_that_saw_it() {
    let db = TestDb::postgres().await;
    let store = db.store.clone();
    let Raw::Postgres(pool) = db.raw().await else {
        unreachable!("postgres only");
    };
    let now = TestClock::starting_now().now();
    let account = store.create_account("racing", now).await.unwrap();
    let endpoint = store
        .create_endpoint(
            new_endpoint(&account.id, "https://racing.example/", &[]),
            now,
        )
        .await
        .unwrap();
    // The ingest stops inside its write, after key-share locking the
    // endpoints, at its delivery insert, until the test lets it go.
    store
        .execute_script(
            "CREATE FUNCTION held_ingest() RETURNS trigger AS $$ BEGIN \
               PERFORM pg_advisory_lock(4242); PERFORM pg_advisory_unlock(4242); \
               RETURN NEW; END $$ LANGUAGE plpgsql; \
             CREATE TRIGGER held_ingest BEFORE INSERT ON deliveries \
               FOR EACH ROW EXECUTE FUNCTION held_ingest();",
        )
        .await
        .unwrap();
    let mut gate = pool.acquire().await.unwrap();
    sqlx::query("SELECT pg_advisory_lock(4242)")
        .execute(&mut *gate)
        .await
        .unwrap();

    let ingest = tokio::spawn({
        let store = store.clone();
        let account = account.id.clone();
        async move {
            let new = NewEvent {
                account_id: account,
                id: "in_the_middle".into(),
                event_type: "t".into(),
                payload: b"{}".to_vec(),
            };
            store
                .insert_event(new, now, now.plus(Duration::from_secs(3600)))
                .await
        }
    });
    // The ingest statement, held by the trigger (its text is longer than
    // what pg_stat_activity keeps, which ends before the delivery insert).
    wait_for_a_wait(&pool, "Lock", "WITH active AS (%").await;
    let deleting = tokio::spawn({
        let store = store.clone();
        let (account, id) = (account.id.clone(), endpoint.id.clone());
        async move { store.delete_endpoint(&account, &id).await }
    });
    wait_for_a_wait(&pool, "Lock", "DELETE FROM endpoints%").await;

    sqlx::query("SELECT pg_advisory_unlock(4242)")
        .execute(&mut *gate)
        .await
        .unwrap();
    let inserted = ingest.await.unwrap().expect("the ingest commits");
    assert_eq!(inserted.deliveries.len(), 1);
    deleting.await.unwrap().expect("the deletion finishes");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE endpoint_id = $1")
        .bind(&endpoint.id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "the ingest's delivery went with its endpoint");
    db.finish().await;
}

/// The ingest plans its fan-out from the endpoints it read, then writes:
/// an endpoint deleted in between gets no delivery (in the database or
/// in what the ingest answers), and the event still reaches the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn an_endpoint_deleted_while_an_ingest_writes_gets_no_delivery() {
    let db = TestDb::postgres().await;
    let store = db.store.clone();
    let Raw::Postgres(pool) = db.raw().await else {
        unreachable!("postgres only");
    };
    let now = TestClock::starting_now().now();
    let account = store.create_account("planning", now).await.unwrap();
    let mut endpoints = Vec::new();
    for url in ["https://stays.example/", "https://goes.example/"] {
        let ep = new_endpoint(&account.id, url, &[]);
        endpoints.push(store.create_endpoint(ep, now).await.unwrap());
    }
    // The write stops at its event insert, after the endpoints were read.
    store
        .execute_script(
            "CREATE FUNCTION held_event() RETURNS trigger AS $$ BEGIN \
               PERFORM pg_advisory_lock(4343); PERFORM pg_advisory_unlock(4343); \
               RETURN NEW; END $$ LANGUAGE plpgsql; \
             CREATE TRIGGER held_event BEFORE INSERT ON events \
               FOR EACH ROW EXECUTE FUNCTION held_event();",
        )
        .await
        .unwrap();
    let mut gate = pool.acquire().await.unwrap();
    sqlx::query("SELECT pg_advisory_lock(4343)")
        .execute(&mut *gate)
        .await
        .unwrap();
    let ingest = tokio::spawn({
        let store = store.clone();
        let account = account.id.clone();
        async move {
            let new = NewEvent {
                account_id: account,
                id: "while_deleting".into(),
                event_type: "t".into(),
                payload: b"{}".to_vec(),
            };
            store
                .insert_event(new, now, now.plus(Duration::from_secs(3600)))
                .await
        }
    });
    wait_for_a_wait(&pool, "Lock", "%INSERT INTO events%").await;
    // The write locks the endpoints after its event insert, so nothing
    // holds this deletion up.
    tokio::time::timeout(
        Duration::from_secs(20),
        store.delete_endpoint(&account.id, &endpoints[1].id),
    )
    .await
    .expect("the deletion did not wait for the held write")
    .unwrap();
    sqlx::query("SELECT pg_advisory_unlock(4343)")
        .execute(&mut *gate)
        .await
        .unwrap();

    let inserted = ingest.await.unwrap().expect("the ingest commits");
    let answered: Vec<&str> = inserted
        .deliveries
        .iter()
        .map(|d| d.endpoint_id.as_str())
        .collect();
    assert_eq!(answered, [endpoints[0].id.as_str()]);
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT endpoint_id FROM deliveries WHERE event_id = 'while_deleting'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(stored, [endpoints[0].id.clone()]);
    db.finish().await;
}

/// Waits until a statement like `query` waits on `kind` (a lock).
async fn wait_for_a_wait(pool: &sqlx::PgPool, kind: &str, query: &str) {
    wait_for_activity(
        pool,
        "wait_event_type = $1 AND query LIKE $2 AND datname = current_database()",
        &[kind, query],
        Duration::from_secs(20),
        &format!("nothing like {query:?} ever waited on a {kind}"),
    )
    .await;
}
