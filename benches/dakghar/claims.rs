//! The claim-only ceiling: how many deliveries per second claims hand out
//! with 1, 4 and 16 claimers at once against a deep queue over many
//! endpoints, no HTTP and no results. What it shows is whether claimers
//! get in each other's way (a cluster-wide lock would hold the figure
//! flat however many there are).

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use dakghar::{
    clock::{Clock, SystemClock},
    store::{ClaimRules, Store},
};

use crate::{
    db::{Backend, BenchDb},
    seed,
};

pub struct Figures {
    pub queued: usize,
    pub endpoints: usize,
    /// (claimers, deliveries claimed per second, claims per second).
    pub runs: Vec<(usize, f64, f64)>,
    /// One claimer's (deliveries, claims) per second with a default rate
    /// limit and a per-host cap set too high to bind.
    pub with_rules: (f64, f64),
}

const BATCH: i64 = 100;

pub async fn run(backend: &Backend, queued: usize, endpoints: usize, url: &str) -> Figures {
    let db = BenchDb::new(backend).await;
    let store = db.store.clone();
    // Slots enough that no endpoint fills up while claims run.
    let account = seed::account(&store, endpoints, url, (queued / endpoints) as i64).await;
    seed::queue(&store, &account.id, queued / endpoints, "claim").await;
    fresh_statistics(&store, backend).await;
    let mut runs = Vec::new();
    for claimers in [1, 4, 16] {
        let (per_sec, calls) =
            claim_for_a_while(&store, backend, claimers, ClaimRules::default()).await;
        runs.push((claimers, per_sec, calls));
    }
    // What the installation-wide limits cost a claim when they do not
    // bind: the checks and book-keeping a production default runs
    // (SQLite: the hosts' counts and the rate budgets spent). An upper
    // bound: nothing settles what is claimed, so the attempts in flight
    // the hosts' count reads grow to thousands over the run (a node holds
    // its workers' batches), and with every endpoint on one host a claim
    // asks one endpoint a round (each has 1 000 due, more than a claim).
    let loose = ClaimRules {
        default_rate: 1_000_000,
        host_cap: 1_000_000,
    };
    let with_rules = claim_for_a_while(&store, backend, 1, loose).await;
    db.finish().await;
    Figures {
        queued,
        endpoints,
        runs,
        with_rules,
    }
}

/// `claimers` claiming at once for five seconds: (deliveries claimed per
/// second, claims per second). Leaves the queue as full as it found it.
async fn claim_for_a_while(
    store: &Store,
    backend: &Backend,
    claimers: usize,
    rules: ClaimRules,
) -> (f64, f64) {
    let claimed = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let run_for = Duration::from_secs(5);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..claimers {
        let (store, claimed, calls) = (store.clone(), Arc::clone(&claimed), Arc::clone(&calls));
        tasks.push(tokio::spawn(async move {
            while start.elapsed() < run_for {
                let now = SystemClock.now();
                let got = store
                    .claim_due(now, now.plus(Duration::from_secs(3600)), BATCH, rules)
                    .await
                    .unwrap();
                claimed.fetch_add(got.len(), Ordering::Relaxed);
                calls.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let n = claimed.load(Ordering::Relaxed);
    eprintln!("  {claimers} claimers ({rules:?}): {n} claimed in {secs:.1}s");
    // Back to a full queue for the next run, as claimed rows were.
    store
        .execute_script(
            "UPDATE deliveries SET state = 'pending', claimed_at = NULL, \
             lease_until = NULL, claim_token = NULL WHERE state = 'in_flight'",
        )
        .await
        .unwrap();
    fresh_statistics(store, backend).await;
    (n as f64 / secs, calls.load(Ordering::Relaxed) as f64 / secs)
}

/// Dead rows gone and statistics current, as a live queue's autovacuum
/// would leave them, so each run starts from the same table.
async fn fresh_statistics(store: &Store, backend: &Backend) {
    let sql = match backend {
        Backend::Sqlite => "ANALYZE",
        Backend::Postgres(_) => "VACUUM ANALYZE deliveries",
    };
    store.execute_script(sql).await.unwrap();
}
