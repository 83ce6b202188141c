//! The engine as shipped, in a `dakghar serve` child: memory idle and
//! with a deep queue, the burn-down rate, and open-loop latency.

use std::{
    path::Path,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use dakghar::store::DeliveryState;

use crate::{
    cpu,
    db::{Backend, BenchDb},
    disk, maintenance,
    receiver::Receiver,
    seed,
    server::Server,
    statements,
    stats::{bursts, ms, spread, Spread},
    wal,
};

pub struct Figures {
    pub idle_mib: f64,
    /// The idle resident set's anonymous memory and file pages.
    pub idle_split_mib: (f64, f64),
    pub per_request: PerRequest,
    pub queued_mib: f64,
    /// The same split at the sample `queued_mib` was read from.
    pub queued_split_mib: (f64, f64),
    pub in_flight_seen: usize,
    pub burned: usize,
    pub burn_per_sec: f64,
    pub burn_peak_mib: f64,
    pub burn_cpu: cpu::PerDelivery,
    pub burn_wal: Option<wal::PerDelivery>,
    pub burn_disk: Option<disk::Figures>,
    /// Postgres with pg_stat_statements only (`statements::between`).
    pub burn_statements: Option<String>,
    /// The server's own account of the burn-down.
    pub burn_view: View,
    /// Right after the burn-down, before `latency`: the node's first
    /// ingests (statements prepared, the fan-out cache filled) and the
    /// burn-down's dead index entries, which the first walks step over
    /// until a vacuum.
    pub warm_up: Latency,
    pub latency: Vec<Latency>,
    pub knee: Knee,
}

/// The knee of the mixed load: the highest open-loop rate, as a share of
/// the burn-down rate, at which every delivery arrives and p99 from the
/// event's scheduled send to the receiver stays within `KNEE_P99`; past
/// it the queue grows. Found by halving the interval between the highest
/// load known to hold and the lowest known not to.
pub struct Knee {
    /// `None`: not even the lowest load held.
    pub load: Option<f64>,
    pub per_sec: f64,
    pub probes: Vec<Probe>,
}

/// One load the knee search ran.
pub struct Probe {
    pub load: f64,
    pub p99: Duration,
    pub held: bool,
    /// The machine's busy share while its events went in.
    pub busy: f64,
    /// CPU a delivery from the first send until the last arrival.
    pub cpu: cpu::PerDelivery,
}

impl Probe {
    fn of(l: &Latency) -> Self {
        Probe {
            load: l.load,
            p99: l.spread.p99,
            held: l.holds(),
            busy: l.busy,
            cpu: l.cpu,
        }
    }
}

/// Server CPU for one API request (`GET /healthz`), in µs: each on a new
/// connection, then all on one kept-alive connection. Producers that
/// reconnect, or a burst that outgrows their pools, pay the first.
pub struct PerRequest {
    pub new_connection_us: f64,
    pub kept_alive_us: f64,
}

async fn per_request(node: &Server) -> PerRequest {
    let url = format!("{}/healthz", node.base);
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    PerRequest {
        new_connection_us: server_us_per_request(node, &fresh, &url).await,
        kept_alive_us: server_us_per_request(node, &reqwest::Client::new(), &url).await,
    }
}

async fn server_us_per_request(node: &Server, client: &reqwest::Client, url: &str) -> f64 {
    const N: usize = 5_000;
    let before = cpu::sample(node.pid()).server();
    for _ in 0..N {
        client.get(url).send().await.unwrap().bytes().await.unwrap();
    }
    (cpu::sample(node.pid()).server() - before) * 1e6 / N as f64
}

pub const KNEE_P99: Duration = Duration::from_millis(50);

/// How long each open-loop phase sends.
const PHASE_SECS: f64 = 10.0;

/// The unmeasured start after the burn-down: in the thirty-first pass's
/// five Postgres runs its first 0.15 s held 22–100 % of the 10 % phase's
/// slowest 1 % (`…-postgres-engine-c64afe2-d*.md`), a node's first
/// ingests rather than its light load. Reported apart.
pub const WARM_UP_SECS: f64 = 2.0;

/// Slow deliveries whose events were sent this close (seconds) belong to
/// one burst: one stall of the node or its database.
pub const SLOW_BURST_APART: f64 = 0.2;

impl Latency {
    fn holds(&self) -> bool {
        self.missing == 0 && self.refused == 0 && self.spread.p99 <= KNEE_P99
    }
}

pub struct Latency {
    pub load: f64,
    pub per_sec: f64,
    pub spread: Spread,
    pub missing: usize,
    pub refused: usize,
    /// From the scheduled send to the ingest call's answer.
    pub ingest: Spread,
    /// From the scheduled send to the generator's sending it: its own
    /// lateness, which the figures above include.
    pub lag: Spread,
    /// The server's own account of this run.
    pub view: View,
    /// The share of the machine busy while the events went in (sends
    /// and their answers): whether a load that does not hold ran out of
    /// cores or waited on something else.
    pub busy: f64,
    /// CPU a delivery from the first send until the last arrival; the
    /// bench process then runs the generator as well as the receiver.
    pub cpu: cpu::PerDelivery,
    /// Postgres only: the WAL over the same span, a delivery, with ingest
    /// and delivery live together (the burn-down's queue was seeded
    /// before its workers started, so it never sees ingest's share).
    pub wal: Option<wal::PerDelivery>,
    /// When the deliveries slower than the p99 were sent: the bursts
    /// (`stats::bursts`) of their events' scheduled sends, seconds from
    /// the first.
    pub slow: Vec<(f64, f64, usize)>,
    /// Postgres only: the vacuums and analyzes that ran meanwhile
    /// (`maintenance::between`).
    pub maintenance: Option<String>,
    /// The disk from the first send until the last arrival.
    pub disk: Option<disk::Figures>,
    /// Postgres with pg_stat_statements only: its statements over the
    /// same span (`statements::between`).
    pub statements: Option<String>,
}

/// What an open-loop run sends to and where it reads its figures.
#[derive(Clone, Copy)]
struct Load<'a> {
    rx: &'a Receiver,
    node: &'a Server,
    key: &'a str,
    endpoints: usize,
    /// For the WAL figure; `None` on SQLite.
    postgres_url: Option<&'a str>,
}

/// The server's own account of a phase (its /metrics, read before and
/// after it: an open-loop run's span starts 0.1 s before its first send
/// and takes in the drain after its last; a burn-down's starts once the
/// node answers).
pub struct View {
    /// The mean ms of each of `STEPS`.
    pub steps_ms: [f64; 5],
    /// SQLite: the share of the span its one write connection was held
    /// (`WRITER`).
    pub writer_held: f64,
    /// SQLite: holds of that connection a second (an ingest group, a
    /// batch of results or a claim each).
    pub writer_holds_per_sec: f64,
    /// Deliveries leased by the ingest that made them, then by claims
    /// (`LEASED`).
    pub leased: [f64; 2],
}

/// The server's own histograms read for the latency split, in order:
/// due → attempt start, the request, the ingest transaction, a claim,
/// and a result's wait to be committed.
const STEPS: [&str; 5] = [
    "dakghar_attempt_delay_seconds",
    "dakghar_request_seconds",
    "dakghar_db_ingest_seconds",
    "dakghar_db_claim_seconds",
    "dakghar_db_record_seconds",
];

/// How long each write held SQLite's one write connection.
const WRITER: &str = "dakghar_db_writer_hold_seconds";

/// The histograms `histograms` reads: `STEPS`, then `WRITER`.
const READ: [&str; 6] = [STEPS[0], STEPS[1], STEPS[2], STEPS[3], STEPS[4], WRITER];

/// Deliveries leased for the node's workers by the ingest that made them
/// due, and by its claim loops.
const LEASED: [&str; 2] = [
    r#"dakghar_leased_total{by="ingest"} "#,
    r#"dakghar_leased_total{by="claim"} "#,
];

/// What `histograms` read, and when.
struct Read {
    /// (sum, count) of each of `READ`.
    sums: [(f64, f64); 6],
    /// Each of `LEASED`.
    leased: [f64; 2],
    at: Instant,
}

/// `READ` and `LEASED` from the server's /metrics.
async fn histograms(base: &str) -> Read {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |name: String| {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(&name)
                    .and_then(|v| v.trim().parse::<f64>().ok())
            })
            .unwrap_or(0.0)
    };
    let read = READ.map(|name| {
        (
            value(format!("{name}_sum ")),
            value(format!("{name}_count ")),
        )
    });
    Read {
        sums: read,
        leased: LEASED.map(|series| value(series.into())),
        at: Instant::now(),
    }
}

/// What the server did between two reads of its histograms.
fn view(before: &Read, after: &Read) -> View {
    let moved = |k: usize| {
        let ((sum, n), (sum0, n0)) = (after.sums[k], before.sums[k]);
        (sum - sum0, n - n0)
    };
    let secs = after.at.duration_since(before.at).as_secs_f64().max(1e-9);
    let (held, holds) = moved(STEPS.len());
    View {
        steps_ms: std::array::from_fn(|k| {
            let (sum, n) = moved(k);
            if n > 0.0 {
                sum / n * 1000.0
            } else {
                0.0
            }
        }),
        writer_held: held / secs,
        writer_holds_per_sec: holds / secs,
        leased: std::array::from_fn(|k| after.leased[k] - before.leased[k]),
    }
}

pub async fn run(
    backend: &Backend,
    rx: &Receiver,
    events: usize,
    endpoints: usize,
    dir: &Path,
) -> Figures {
    let db = BenchDb::new(backend).await;
    let store = db.store.clone();
    let per_endpoint = 1000_usize.div_ceil(endpoints) as i64;
    let account = seed::account(&store, endpoints, &rx.slow_url, per_endpoint).await;
    let key = seed::key(&store, &account).await;

    // Enough claim loops (of 100) to hold 1 000 requests open.
    let node = Server::start(&db.child_url, &["--workers", "10"], dir).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (idle_mib, _) = node.memory();
    let idle_split_mib = node.rss_split();
    let per_request = per_request(&node).await;
    eprintln!(
        "  idle RSS {idle_mib:.1} MiB; server CPU a request {:.0} µs on a new connection, {:.0} µs kept alive; queueing {events} events",
        per_request.new_connection_us, per_request.kept_alive_us
    );
    rx.reset_most_open();
    seed::queue(&store, &account.id, events, "bd").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while rx.open() < 950 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (mut queued_mib, mut queued_split_mib) = (0.0, (0.0, 0.0));
    for _ in 0..20 {
        let (rss, split) = (node.memory().0, node.rss_split());
        if rss > queued_mib {
            (queued_mib, queued_split_mib) = (rss, split);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let in_flight_seen = rx.reset_most_open();
    eprintln!("  {in_flight_seen} in flight at most, RSS {queued_mib:.1} MiB");
    node.stop().await;

    store
        .execute_script(&format!(
            "UPDATE endpoints SET url = '{}', max_in_flight = 64",
            rx.fast_url
        ))
        .await
        .unwrap();
    let (burn, node) = burn_down(&db, rx, dir).await;
    let Burn {
        burned,
        per_sec: burn_per_sec,
        cpu: burn_cpu,
        wal: burn_wal,
        disk: burn_disk,
        statements: burn_statements,
        view: burn_view,
        peak_mib: burn_peak_mib,
    } = burn;

    let target = Load {
        rx,
        node: &node,
        key: &key,
        endpoints,
        postgres_url: db.postgres_url(),
    };
    let warm_up = open_loop(&target, burn_per_sec * 0.1, 0.1, "warm", WARM_UP_SECS).await;
    let mut latency = Vec::new();
    for load in [0.1, 0.7] {
        let per_sec = burn_per_sec * load;
        let tag = format!("lat{}", (load * 100.0) as u32);
        latency.push(open_loop(&target, per_sec, load, &tag, PHASE_SECS).await);
    }
    let knee = knee(&target, burn_per_sec, &latency).await;
    node.stop().await;
    db.finish().await;
    Figures {
        idle_mib,
        idle_split_mib,
        per_request,
        queued_mib,
        queued_split_mib,
        in_flight_seen,
        burned,
        burn_per_sec,
        burn_peak_mib,
        burn_cpu,
        burn_wal,
        burn_disk,
        burn_statements,
        burn_view,
        warm_up,
        latency,
        knee,
    }
}

/// See `Knee`. The loads already run (`known`) bound the search; four
/// more probes narrow it to about 1/16 of the interval.
async fn knee(target: &Load<'_>, burn_per_sec: f64, known: &[Latency]) -> Knee {
    let mut probes: Vec<Probe> = known.iter().map(Probe::of).collect();
    let mut held = probes
        .iter()
        .filter(|p| p.held)
        .map(|p| p.load)
        .reduce(f64::max);
    let mut lo = held.unwrap_or(0.0);
    let mut hi = probes
        .iter()
        .filter(|p| !p.held && p.load > lo)
        .map(|p| p.load)
        .fold(1.0_f64, f64::min);
    for step in 0..4 {
        let load = (lo + hi) / 2.0;
        let tag = format!("knee{step}");
        let l = open_loop(target, burn_per_sec * load, load, &tag, PHASE_SECS).await;
        let ok = l.holds();
        eprintln!(
            "  knee probe at {:.0} %: p99 {:.1} ms, {}, machine {:.0} % busy",
            load * 100.0,
            ms(l.spread.p99),
            if ok { "holds" } else { "does not hold" },
            l.busy * 100.0
        );
        probes.push(Probe::of(&l));
        if ok {
            lo = load;
            held = Some(load);
        } else {
            hi = load;
        }
    }
    probes.sort_by(|a, b| a.load.total_cmp(&b.load));
    Knee {
        load: held,
        per_sec: held.unwrap_or(0.0) * burn_per_sec,
        probes,
    }
}

pub struct Burn {
    pub burned: usize,
    pub per_sec: f64,
    pub cpu: cpu::PerDelivery,
    /// Postgres only.
    pub wal: Option<wal::PerDelivery>,
    pub disk: Option<disk::Figures>,
    pub statements: Option<String>,
    pub view: View,
    pub peak_mib: f64,
}

/// Starts a node on a database with its backlog queued and times it
/// until the receiver has every pending delivery; the node keeps running.
async fn burn_down(db: &BenchDb, rx: &Receiver, dir: &Path) -> (Burn, Server) {
    let burned = db
        .store
        .count_deliveries(DeliveryState::Pending)
        .await
        .unwrap() as usize;
    let before = rx.count();
    let wal_before = wal::mark(db.postgres_url()).await;
    let statements_before = statements::mark(db.postgres_url()).await;
    let start = Instant::now();
    let node = Server::start(&db.child_url, &[], dir).await;
    let cpu_before = cpu::sample(node.pid());
    let disk_watch = disk::watch();
    let steps_before = histograms(&node.base).await;
    let deadline = start + Duration::from_secs(3600);
    while rx.count() - before < burned {
        assert!(Instant::now() < deadline, "the burn-down stalled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let per_sec = burned as f64 / start.elapsed().as_secs_f64();
    let cpu = cpu::per_delivery(cpu_before, cpu::sample(node.pid()), burned);
    let disk = disk_watch.finish();
    let wal = wal::per_delivery(wal_before, wal::mark(db.postgres_url()).await, burned);
    let statements = statements::between(
        statements_before.as_ref(),
        statements::mark(db.postgres_url()).await.as_ref(),
        burned,
    );
    let seen = view(&steps_before, &histograms(&node.base).await);
    let (_, peak_mib) = node.memory();
    eprintln!(
        "  burn-down: {burned} in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    let burn = Burn {
        burned,
        per_sec,
        cpu,
        wal,
        disk,
        statements,
        view: seen,
        peak_mib,
    };
    (burn, node)
}

/// The burn-down alone, of `events` × `endpoints` queued before the node
/// starts: the figure set beside the peer's, same size and receiver.
pub async fn burn_only(
    backend: &Backend,
    rx: &Receiver,
    events: usize,
    endpoints: usize,
    dir: &Path,
) -> Burn {
    let db = BenchDb::new(backend).await;
    let account = seed::account(&db.store, endpoints, &rx.fast_url, 64).await;
    seed::queue(&db.store, &account.id, events, "small").await;
    let (burn, node) = burn_down(&db, rx, dir).await;
    node.stop().await;
    db.finish().await;
    burn
}

/// Says when each of `n` sends is due, `gap` apart from `start`, from a
/// thread of its own: tokio's timers fire on whole milliseconds, and sends
/// paced by them started 0.9 ms late at p50 (2 ms at p99), which the
/// latency figures counted as the server's. A thread's sleep overshoots
/// by tens of microseconds.
fn pace(start: Instant, gap: Duration, n: usize) -> tokio::sync::mpsc::UnboundedReceiver<usize> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for i in 0..n {
            let at = start + gap * i as u32;
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            if tx.send(i).is_err() {
                return;
            }
        }
    });
    rx
}

/// Sends events on a fixed schedule whatever the server does, and times
/// each delivery from its event's scheduled send, so a late generator or
/// a slow ingest shows up in the figure instead of hiding it.
async fn open_loop(
    target: &Load<'_>,
    deliveries_per_sec: f64,
    load: f64,
    tag: &str,
    secs: f64,
) -> Latency {
    let Load {
        rx,
        node,
        key,
        endpoints,
        postgres_url,
    } = *target;
    let events_per_sec = (deliveries_per_sec / endpoints as f64).max(1.0);
    let n = ((events_per_sec * secs) as usize).clamp(200, 20_000);
    let gap = Duration::from_secs_f64(1.0 / events_per_sec);
    let base = node.base.as_str();
    let client = reqwest::Client::new();
    let before = histograms(base).await;
    let refused = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(std::sync::Mutex::new(Vec::with_capacity(n)));
    let mut lags = Vec::with_capacity(n);
    rx.note_arrivals(true);
    let start = Instant::now() + Duration::from_millis(100);
    let mut ticks = pace(start, gap, n);
    let mut sends = Vec::with_capacity(n);
    let wal_before = wal::mark(postgres_url).await;
    let maintenance_before = maintenance::mark(postgres_url).await;
    let statements_before = statements::mark(postgres_url).await;
    let cpu_before = cpu::sample(node.pid());
    let machine_before = cpu::Machine::now();
    let disk_watch = disk::watch();
    while let Some(i) = ticks.recv().await {
        let scheduled = start + gap * i as u32;
        lags.push(scheduled.elapsed());
        let (client, refused, answered) =
            (client.clone(), Arc::clone(&refused), Arc::clone(&answered));
        let url = format!("{base}/api/v1/events");
        let body = serde_json::json!({
            "id": format!("{tag}_{i}"),
            "type": "invoice.paid",
            "payload": {"n": i, "data": "x".repeat(1000)},
        });
        let key = key.to_string();
        sends.push(tokio::spawn(async move {
            let ok = client
                .post(url)
                .bearer_auth(key)
                .json(&body)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            answered.lock().unwrap().push(scheduled.elapsed());
            if !ok {
                refused.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for s in sends {
        s.await.unwrap();
    }
    let busy = cpu::Machine::now().busy_since(&machine_before);
    let want = n * endpoints;
    let deadline = Instant::now() + Duration::from_secs(60);
    let arrivals = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let arrived: usize = rx.with_arrivals(|a| a.values().map(Vec::len).sum());
        if arrived >= want || Instant::now() > deadline {
            break rx.take_arrivals();
        }
    };
    let cpu_after = cpu::sample(node.pid());
    let disk = disk_watch.finish();
    let wal_after = wal::mark(postgres_url).await;
    let maintenance = maintenance::between(
        maintenance_before.as_ref(),
        maintenance::mark(postgres_url).await.as_ref(),
    );
    let statements_after = statements::mark(postgres_url).await;
    let mut samples = Vec::with_capacity(want);
    let mut sent_at = Vec::with_capacity(want);
    for (id, times) in &arrivals {
        let Some(i) = id
            .strip_prefix(&format!("{tag}_"))
            .and_then(|i| i.parse::<u32>().ok())
        else {
            continue;
        };
        let scheduled = start + gap * i;
        samples.extend(times.iter().map(|t| t.saturating_duration_since(scheduled)));
        sent_at.extend(times.iter().map(|_| (gap * i).as_secs_f64()));
    }
    let over = spread(samples.clone()).p99;
    let slow = bursts(
        samples
            .iter()
            .zip(&sent_at)
            .filter(|(s, _)| **s > over)
            .map(|(_, &t)| t)
            .collect(),
        SLOW_BURST_APART,
    );
    let missing = want.saturating_sub(samples.len());
    let cpu = cpu::per_delivery(cpu_before, cpu_after, samples.len());
    let wal = wal::per_delivery(wal_before, wal_after, samples.len());
    let statements = statements::between(
        statements_before.as_ref(),
        statements_after.as_ref(),
        samples.len(),
    );
    let ingest = spread(std::mem::take(&mut *answered.lock().unwrap()));
    let lag = spread(lags);
    let seen = view(&before, &histograms(base).await);
    eprintln!(
        "  latency at {:.0}% ({:.0} deliveries/s): {} samples, {missing} missing; the generator's lag p50 {:.2} ms",
        load * 100.0,
        deliveries_per_sec,
        samples.len(),
        lag.p50.as_secs_f64() * 1000.0
    );
    Latency {
        load,
        per_sec: events_per_sec * endpoints as f64,
        spread: spread(samples),
        missing,
        refused: refused.load(Ordering::Relaxed),
        ingest,
        lag,
        view: seen,
        busy,
        cpu,
        wal,
        slow,
        maintenance,
        disk,
        statements,
    }
}
