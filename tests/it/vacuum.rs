//! Postgres: a worker node vacuums `deliveries` soon after heavy churn, and
//! leaves a quiet or freshly vacuumed table alone. SQLite has nothing to do.

use std::time::Duration;

use dakghar::{
    clock::{Clock, TestClock},
    store::{NewEvent, Store, StoreError, VacuumPolicy},
};
use tokio_util::sync::CancellationToken;

use crate::helpers::{new_endpoint, Raw, TestDb};

const DEAD_ROWS: i64 = 2_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn a_churned_deliveries_table_is_vacuumed_by_the_worker_job() {
    let db = TestDb::postgres().await;
    let store = db.store.clone();
    let raw = db.raw().await;
    queue_and_churn(&store, 200, 15).await;
    let dead_before = wait_for_dead_rows(&raw, DEAD_ROWS).await;
    assert_eq!(
        vacuums(&raw).await,
        [0, 0],
        "nothing vacuumed the tables yet"
    );

    // A threshold above what is dead: no vacuum.
    let high = VacuumPolicy {
        every: Duration::from_millis(50),
        dead_rows: dead_before + 1_000_000,
        min_gap: Duration::ZERO,
    };
    assert_eq!(vacuum_each(&store, &high).await, [None, None]);
    assert_eq!(vacuums(&raw).await, [0, 0]);
    // Only a partition rows pass through: a name is never made into SQL.
    for wrong in ["deliveries", "pending_deliveries; DROP TABLE events", ""] {
        assert!(
            matches!(
                store.vacuum_if_churned(wrong, &high).await,
                Err(StoreError::NotFound)
            ),
            "{wrong:?} refused"
        );
    }

    // The job as a worker node runs it.
    let stop = CancellationToken::new();
    let job = dakghar::jobs::vacuum::spawn(
        store.clone(),
        VacuumPolicy {
            dead_rows: DEAD_ROWS,
            ..high
        },
        stop.clone(),
    )
    .expect("a job on Postgres");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while vacuums(&raw).await.contains(&0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the job never vacuumed {dead_before} dead rows"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    job.await.unwrap();
    // Below the job's bar, not necessarily at zero: the other tests share
    // this database, and rows that one of their transactions may still
    // see stay dead until it ends (seen: 400 left of 2 000).
    let left = dead_rows(&raw).await;
    assert!(
        left.iter().all(|n| *n < DEAD_ROWS),
        "the vacuums cleared the dead rows: {left:?} left of {dead_before}"
    );

    // Churn again: past the threshold, but within the gap since the last
    // vacuum, so nothing runs.
    queue_and_churn(&store, 0, 15).await;
    wait_for_dead_rows(&raw, DEAD_ROWS).await;
    let gap = VacuumPolicy {
        every: Duration::from_millis(50),
        dead_rows: DEAD_ROWS,
        min_gap: Duration::from_secs(3600),
    };
    assert_eq!(vacuum_each(&store, &gap).await, [None, None]);
    assert_eq!(vacuums(&raw).await, [1, 1]);
    let done = vacuum_each(
        &store,
        &VacuumPolicy {
            min_gap: Duration::ZERO,
            ..gap
        },
    )
    .await;
    for dead in done {
        let dead = dead.expect("due once the gap is over");
        assert!(dead >= DEAD_ROWS, "{dead} dead rows reported");
    }
    assert_eq!(vacuums(&raw).await, [2, 2]);
    db.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_needs_no_vacuum_job() {
    let db = TestDb::sqlite().await;
    queue_and_churn(&db.store, 50, 2).await;
    let eager = VacuumPolicy {
        every: Duration::from_millis(10),
        dead_rows: 0,
        min_gap: Duration::ZERO,
    };
    assert!(db.store.churned_partitions().is_empty());
    assert_eq!(
        db.store
            .vacuum_if_churned("pending_deliveries", &eager)
            .await
            .unwrap(),
        None
    );
    assert!(
        dakghar::jobs::vacuum::spawn(db.store.clone(), eager, CancellationToken::new()).is_none()
    );
    db.finish().await;
}

/// `Store::vacuum_if_churned` on each churned partition, in order.
async fn vacuum_each(store: &Store, policy: &VacuumPolicy) -> Vec<Option<i64>> {
    let mut done = Vec::new();
    for partition in store.churned_partitions() {
        done.push(store.vacuum_if_churned(partition, policy).await.unwrap());
    }
    done
}

/// Queues `events` (one delivery each) and moves every delivery out of
/// the waiting partition and back `rounds` times, leaving dead index
/// entries behind each time.
async fn queue_and_churn(store: &Store, events: usize, rounds: usize) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    if events > 0 {
        let account = store.create_account("churn", now).await.unwrap();
        store
            .create_endpoint(
                new_endpoint(&account.id, "https://churn.example/", &[]),
                now,
            )
            .await
            .unwrap();
        for i in 0..events {
            let new = NewEvent {
                account_id: account.id.clone(),
                id: format!("churn_{i}"),
                event_type: "invoice.paid".into(),
                payload: b"{}".to_vec(),
            };
            store
                .insert_event(new, now, now.plus(Duration::from_secs(3600)))
                .await
                .unwrap();
        }
    }
    // A claim and its result, in effect: each round moves every row into
    // the in-flight partition and back (migration 0022).
    for _ in 0..rounds {
        store
            .execute_script(
                "UPDATE deliveries SET state = 'in_flight', lease_until = 1, claim_token = 't' \
                   WHERE state = 'pending'; \
                 UPDATE deliveries SET state = 'pending', lease_until = NULL, claim_token = NULL \
                   WHERE state = 'in_flight'",
            )
            .await
            .unwrap();
    }
}

/// Postgres reports dead rows a moment after the writing transaction
/// ends. Returns the fewer of the two partitions'.
async fn wait_for_dead_rows(raw: &Raw, at_least: i64) -> i64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let dead = dead_rows(raw).await;
        if dead.iter().all(|&n| n >= at_least) {
            return dead.into_iter().min().unwrap_or_default();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Postgres counted only {dead:?} dead rows"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `column` of the partitions the churn passes through (migration 0022):
/// the waiting deliveries', then the in-flight ones'.
async fn table_stat(raw: &Raw, column: &str) -> [i64; 2] {
    let Raw::Postgres(pool) = raw else {
        unreachable!("postgres only");
    };
    let mut out = [0; 2];
    for (i, table) in ["pending_deliveries", "in_flight_deliveries"]
        .iter()
        .enumerate()
    {
        out[i] = sqlx::query_scalar(&format!(
            "SELECT {column} FROM pg_stat_user_tables WHERE relid = '{table}'::regclass"
        ))
        .fetch_one(pool)
        .await
        .unwrap();
    }
    out
}

/// What the job counts: rows that died or passed through since the last vacuum.
async fn dead_rows(raw: &Raw) -> [i64; 2] {
    table_stat(raw, "GREATEST(n_dead_tup, n_ins_since_vacuum)").await
}

/// Manual vacuums only: autovacuum may visit the table too, and that is fine.
async fn vacuums(raw: &Raw) -> [i64; 2] {
    table_stat(raw, "vacuum_count").await
}
