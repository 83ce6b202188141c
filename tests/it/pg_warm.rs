//! On Postgres the delivery path takes the connection that answered last
//! (`store::postgres::Warm`), where sqlx's pool hands out the one idle the
//! longest. A connection idle for a while, or whose statement failed or
//! was dropped part-way, goes back to the pool, which checks it; none is
//! kept while the pool has none to spare.

use std::time::Duration;

use dakghar::{
    clock::{Clock, TestClock},
    store::{postgres::Warm, ClaimRules},
};
use sqlx::{postgres::PgPoolOptions, Connection, PgConnection, PgPool};

use crate::helpers::{postgres_url, TestDb};

/// Long enough that no kept connection goes back to the pool for being
/// idle within a test.
const NEVER_IDLE: Duration = Duration::from_secs(3600);

async fn pool(max: u32) -> PgPool {
    let url = postgres_url().expect("TEST_DATABASE_URL was set when the tests were built");
    PgPoolOptions::new()
        .max_connections(max)
        .connect(&url)
        .await
        .expect("connect to TEST_DATABASE_URL")
}

async fn backend(conn: &mut PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// Waits until `done` holds (a connection dropped goes back to the pool
/// through a task of sqlx's, an idle one through `Warm`'s), and fails the
/// test after 10 s saying it never saw `what`.
async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "never saw {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until the pool holds `n` idle connections.
async fn until_idle_in_pool(pool: &PgPool, n: usize) {
    until(&format!("{n} idle in the pool"), || pool.num_idle() == n).await;
}

/// Waits until `warm` keeps no connection.
async fn until_none_kept(warm: &Warm) {
    until("an idle connection given back", || warm.kept() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn the_connection_that_answered_last_is_handed_out_next() {
    let pool = pool(4).await;
    let warm = Warm::start(pool.clone(), 4, NEVER_IDLE);
    let mut held = Vec::new();
    let mut backends = Vec::new();
    for _ in 0..3 {
        let mut conn = warm.acquire().await.unwrap();
        backends.push(backend(&mut conn).await);
        held.push(conn);
    }
    let mut distinct = backends.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "three connections at once: {backends:?}");
    for conn in held {
        conn.answered();
    }
    assert_eq!(warm.kept(), 3);
    assert_eq!(pool.num_idle(), 0, "kept off the pool");
    for _ in 0..5 {
        let mut conn = warm.acquire().await.unwrap();
        assert_eq!(
            backend(&mut conn).await,
            backends[2],
            "the one that answered last, each time"
        );
        conn.answered();
    }
    assert_eq!(warm.kept(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn beyond_what_it_keeps_a_connection_goes_back_to_the_pool() {
    let pool = pool(4).await;
    let warm = Warm::start(pool.clone(), 1, NEVER_IDLE);
    let mut first = warm.acquire().await.unwrap();
    let mut second = warm.acquire().await.unwrap();
    let first_backend = backend(&mut first).await;
    backend(&mut second).await;
    first.answered();
    second.answered();
    assert_eq!(warm.kept(), 1);
    until_idle_in_pool(&pool, 1).await;
    let mut next = warm.acquire().await.unwrap();
    assert_eq!(backend(&mut next).await, first_backend, "the one it kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn a_connection_not_used_again_soon_goes_back_to_the_pool_and_its_check() {
    let pool = pool(4).await;
    let warm = Warm::start(pool.clone(), 4, Duration::from_millis(50));
    let mut conn = warm.acquire().await.unwrap();
    backend(&mut conn).await;
    conn.answered();
    until_none_kept(&warm).await;
    until_idle_in_pool(&pool, 1).await;

    // One whose backend ended while it was kept is never handed out.
    let mut conn = warm.acquire().await.unwrap();
    let dead = backend(&mut conn).await;
    conn.answered();
    let url = postgres_url().unwrap();
    let mut admin = PgConnection::connect(&url).await.unwrap();
    let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 10000)")
        .bind(dead)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert!(ended, "the kept connection's backend ended");
    until_none_kept(&warm).await;
    let mut conn = warm.acquire().await.unwrap();
    assert_ne!(backend(&mut conn).await, dead, "a live connection");
    conn.answered();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn none_is_kept_while_the_pool_has_none_to_spare() {
    let pool = pool(2).await;
    let warm = Warm::start(pool.clone(), 2, NEVER_IDLE);
    let mut first = warm.acquire().await.unwrap();
    let mut second = warm.acquire().await.unwrap();
    backend(&mut first).await;
    let second_backend = backend(&mut second).await;
    first.answered();
    assert_eq!(warm.kept(), 0, "the pool had no connection to spare");
    until_idle_in_pool(&pool, 1).await;
    second.answered();
    assert_eq!(warm.kept(), 1, "now it has one");
    let mut next = warm.acquire().await.unwrap();
    assert_eq!(backend(&mut next).await, second_backend);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn a_statement_that_failed_or_was_dropped_leaves_its_connection_to_the_pool() {
    let pool = pool(4).await;
    let warm = Warm::start(pool.clone(), 4, NEVER_IDLE);

    let mut conn = warm.acquire().await.unwrap();
    let failed = sqlx::query_scalar::<_, i32>("SELECT 1 / 0")
        .fetch_one(&mut *conn)
        .await;
    assert!(failed.is_err());
    drop(conn);
    assert_eq!(warm.kept(), 0, "a failed statement's connection not kept");

    let mut conn = warm.acquire().await.unwrap();
    let sleeper = backend(&mut conn).await;
    let cut_short = tokio::time::timeout(
        Duration::from_millis(100),
        sqlx::query("SELECT pg_sleep(1)").execute(&mut *conn),
    )
    .await;
    assert!(cut_short.is_err(), "the statement was dropped part-way");
    drop(conn);
    assert_eq!(warm.kept(), 0, "a dropped statement's connection not kept");

    // The next call gets a connection that answers its own statement.
    let mut conn = warm.acquire().await.unwrap();
    assert_ne!(backend(&mut conn).await, sleeper);
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(one, 1);
    conn.answered();
    assert_eq!(warm.kept(), 1);
}

/// The store's claims keep their connection on the stack; once the store
/// is closed, no call gets one from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn a_closed_store_hands_out_none_of_the_connections_it_kept() {
    let db = TestDb::postgres().await;
    let now = TestClock::starting_now().now();
    let claim = || {
        db.store.claim_due(
            now,
            now.plus(Duration::from_secs(300)),
            10,
            ClaimRules::default(),
        )
    };
    assert!(claim().await.unwrap().is_empty());
    tokio::time::timeout(Duration::from_secs(30), db.store.close())
        .await
        .expect("the store closed");
    assert!(claim().await.is_err(), "a claim on a closed store");
    db.finish().await;
}
