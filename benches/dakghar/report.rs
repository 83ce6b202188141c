//! The results table: printed, and written to bench/results/<date>-<backend>.md.

use std::{fmt::Write as _, process::Command, time::Duration};

use crate::{
    ceiling::{self, Http},
    claims, dashboard,
    db::Backend,
    delivery, disk, ingest, peer,
    stats::{ms, Spread},
    wal,
};

pub struct Run<'a> {
    pub backend: &'a Backend,
    pub events: usize,
    pub endpoints: usize,
    pub http: &'a Http,
    pub db_ingest: f64,
    pub db_per_sec: f64,
    pub db_latency: &'a ceiling::DbLatency,
    pub delivery: Option<&'a delivery::Figures>,
    pub ingest: Option<&'a ingest::Figures>,
    pub claims: Option<&'a claims::Figures>,
    /// graphile-worker's burn-down and Dakghar's of the same size.
    pub peer: Option<(&'a peer::PeerRun, &'a delivery::Burn)>,
    pub dashboard: Option<&'a dashboard::Figures>,
    /// The share of the machine's CPU time the host took over the run.
    pub stolen: f64,
}

fn yes(met: bool) -> &'static str {
    if met {
        "yes"
    } else {
        "**no**"
    }
}

/// "37 deliveries in 3 bursts: 0.10–0.18 s (20) · 4.52 s (10) · …".
fn slow_bursts(bursts: &[(f64, f64, usize)]) -> String {
    const SHOWN: usize = 8;
    let total: usize = bursts.iter().map(|b| b.2).sum();
    let mut each: Vec<String> = bursts
        .iter()
        .take(SHOWN)
        .map(|&(first, last, n)| {
            let (first, last) = (format!("{first:.2}"), format!("{last:.2}"));
            if last != first {
                format!("{first}–{last} s ({n})")
            } else {
                format!("{first} s ({n})")
            }
        })
        .collect();
    if bursts.len() > SHOWN {
        each.push(format!("{} more", bursts.len() - SHOWN));
    }
    format!(
        "{total} deliveries in {} burst{}: {}",
        bursts.len(),
        if bursts.len() == 1 { "" } else { "s" },
        each.join(" · ")
    )
}

fn spread_ms(s: &Spread) -> String {
    format!(
        "p50 {:.2} · p95 {:.2} · p99 {:.2} · max {:.2} ms",
        ms(s.p50),
        ms(s.p95),
        ms(s.p99),
        ms(s.max)
    )
}

pub fn render(r: &Run) -> String {
    let mut o = String::new();
    let backend = r.backend.name();
    let date = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC");
    let _ = writeln!(o, "# Dakghar benchmark: {backend}, {date}\n");
    let _ = writeln!(
        o,
        "{}, commit {}. Burn-down of {} events × {} endpoints. The host took {:.1} % of the machine's CPU time over this run (steal): compare runs only where that is near nothing.\n",
        machine(),
        commit(),
        r.events,
        r.endpoints,
        r.stolen * 100.0
    );
    let ceiling = 1.0 / (1.0 / r.http.per_sec + 1.0 / r.db_per_sec);
    let _ = writeln!(o, "## Ceilings (this machine, this run)\n");
    let _ = writeln!(o, "| Ceiling | Value | How |\n|---|---|---|");
    let _ = writeln!(
        o,
        "| B_http | {:.0} requests/s | reqwest, keep-alive, 64 in flight, 1 KB POST, receiver answers 204 |",
        r.http.per_sec
    );
    let _ = writeln!(
        o,
        "| B_http latency | {} | the same, one request at a time |",
        spread_ms(&r.http.latency)
    );
    let _ = writeln!(
        o,
        "| B_db | {:.0} deliveries/s | Dakghar's store calls per delivery, no HTTP: ingest, claim (4 loops of 100), the batch's endpoints and events, attempts and endpoint health in one transaction per batch |",
        r.db_per_sec
    );
    let _ = writeln!(
        o,
        "| B_db ingest alone | {:.0} events/s | 16 producers through the store, {} deliveries each |",
        r.db_ingest, r.endpoints
    );
    let _ = writeln!(
        o,
        "| B_db commit latency | {} | one one-row INSERT committed at a time, idle database |",
        spread_ms(&r.db_latency.commit)
    );
    let _ = writeln!(
        o,
        "| B_db ingest latency | {} | one event's ingest transaction ({} deliveries) at a time, idle database |",
        spread_ms(&r.db_latency.ingest),
        r.endpoints
    );
    let _ = writeln!(
        o,
        "| Combined ceiling | {ceiling:.0} deliveries/s | 1 / (1/B_http + 1/B_db) |\n"
    );

    let _ = writeln!(o, "## Dakghar\n");
    let _ = writeln!(
        o,
        "| Figure | Value | Ratio | Goal | Met |\n|---|---|---|---|---|"
    );
    if let Some(d) = r.delivery {
        engine(&mut o, r, d, ceiling);
    }
    if let Some(i) = r.ingest {
        ingest_rows(&mut o, r, i);
    }
    if let Some(c) = r.claims {
        claim_rows(&mut o, c);
    }
    if let Some((theirs, ours)) = r.peer {
        peer_rows(&mut o, theirs, ours, r.delivery);
    }
    let Some(dashboard) = r.dashboard else {
        let _ = writeln!(o, "\nThe dashboard was not measured.");
        return o;
    };
    for (name, s) in &dashboard.pages {
        let limit = if name.contains("detail") { 20.0 } else { 50.0 };
        let _ = writeln!(
            o,
            "| Dashboard: {name} (1 M deliveries) | {} | | p95 ≤ {limit} ms | {} |",
            spread_ms(s),
            yes(ms(s.p95) <= limit)
        );
    }
    let _ = writeln!(
        o,
        "\nDashboard pages are timed over HTTP as a signed-in customer (query and server render), 200 requests each after 20 warm-ups; the million rows took {:.0} s to load.",
        dashboard.seed_secs
    );
    o
}

/// The burn-down, its CPU and latency, and memory.
fn engine(o: &mut String, r: &Run, d: &delivery::Figures, ceiling: f64) {
    let _ = writeln!(
        o,
        "| Burn-down ({} queued) | {:.0} deliveries/s | {:.2} × ceiling · {:.2} × B_http · {:.2} × B_db | ≥ 0.70 × ceiling | {} |",
        d.burned,
        d.burn_per_sec,
        d.burn_per_sec / ceiling,
        d.burn_per_sec / r.http.per_sec,
        d.burn_per_sec / r.db_per_sec,
        yes(d.burn_per_sec >= 0.7 * ceiling)
    );
    let c = &d.burn_cpu;
    let _ = writeln!(
        o,
        "| CPU per delivery over the burn-down | {:.0} µs: server {:.0} (SQLite's threads {:.0}) · Postgres {:.0} · receiver {:.0}; machine {:.0} % busy, {:.1} % taken by the host | {:.0} deliveries/s if all {} cores did nothing else | | |",
        c.total_us(),
        c.server_us,
        c.sqlite_us,
        c.postgres_us,
        c.receiver_us,
        c.machine_busy * 100.0,
        c.stolen * 100.0,
        cores() as f64 * 1e6 / c.total_us().max(1.0),
        cores()
    );
    if let Some(w) = &d.burn_wal {
        let _ = writeln!(
            o,
            "| WAL per delivery over the burn-down (Postgres's pg_stat_wal, the whole server) | {}; {} checkpoints started by WAL volume | | | |",
            wal::describe(Some(w)),
            w.wal_checkpoints.map_or("–".into(), |n| n.to_string())
        );
    }
    let _ = writeln!(
        o,
        "| The disk over the burn-down (/proc/diskstats, every whole disk) | {} | | | |",
        disk::describe(d.burn_disk.as_ref())
    );
    if let Some(s) = &d.burn_statements {
        let _ = writeln!(
            o,
            "| Postgres's statements over the burn-down (pg_stat_statements, the whole database; time a delivery, the costliest first) | {s} | | | |"
        );
    }
    let _ = writeln!(
        o,
        "| Server's view over the burn-down (its /metrics) | {} | | | |",
        steps(&d.burn_view, r.backend)
    );
    let slack_ms = match r.backend {
        Backend::Sqlite => 1.0,
        Backend::Postgres(_) => 3.0,
    };
    let w = &d.warm_up;
    let _ = writeln!(
        o,
        "| Warm-up at 10 % load, just after the burn-down ({:.0} deliveries/s for {:.0} s, open loop; in no figure below) | {} · ingest call p99 {:.2} ms · slowest 1 %: {} | | | |",
        w.per_sec,
        delivery::WARM_UP_SECS,
        spread_ms(&w.spread),
        ms(w.ingest.p99),
        slow_bursts(&w.slow)
    );
    for l in &d.latency {
        let over = ms(l.spread.p50) - ms(r.http.latency.p50);
        let goal = l.load < 0.5;
        let note = if l.missing + l.refused > 0 {
            format!(" ({} missing, {} refused)", l.missing, l.refused)
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "| Latency at {:.0} % load ({:.0} deliveries/s, open loop){note} | {} | p50 = B_http p50 + {over:.2} ms | {} | {} |",
            l.load * 100.0,
            l.per_sec,
            spread_ms(&l.spread),
            if goal {
                format!("p50 ≤ B_http p50 + {slack_ms} ms, p99 ≤ 15 ms")
            } else {
                "none".into()
            },
            if goal {
                yes(over <= slack_ms && ms(l.spread.p99) <= 15.0 && l.missing == 0)
            } else {
                "–"
            }
        );
    }
    let k = &d.knee;
    let probes = k
        .probes
        .iter()
        .map(|p| {
            let verdict = if p.held { "holds" } else { "does not" };
            format!(
                "{:.0} % {verdict} (p99 {:.1} ms, machine {:.0} % busy, {:.0} µs a delivery: server {:.0} · Postgres {:.0} · bench {:.0})",
                p.load * 100.0,
                ms(p.p99),
                p.busy * 100.0,
                p.cpu.total_us(),
                p.cpu.server_us,
                p.cpu.postgres_us,
                p.cpu.receiver_us
            )
        })
        .collect::<Vec<_>>()
        .join(" · ");
    let _ = writeln!(
        o,
        "| Knee of the mixed load (open loop; every delivery arrives, p99 scheduled send → receiver ≤ {} ms) | {} | {probes} | ≥ 0.70 × burn-down | {} |",
        delivery::KNEE_P99.as_millis(),
        match k.load {
            Some(load) => format!("{:.0} deliveries/s ({load:.2} × burn-down)", k.per_sec),
            None => "below the lowest load probed".into(),
        },
        yes(k.load.is_some_and(|load| load >= 0.7))
    );
    for l in &d.latency {
        let _ = writeln!(
            o,
            "| Ingest call at {:.0} % load (scheduled send to answer) | {} | | | |",
            l.load * 100.0,
            spread_ms(&l.ingest)
        );
        let _ = writeln!(
            o,
            "| The generator's lag at {:.0} % load (scheduled send to sending; counted in both figures above) | {} | | | |",
            l.load * 100.0,
            spread_ms(&l.lag)
        );
        let c = &l.cpu;
        let _ = writeln!(
            o,
            "| CPU per delivery at {:.0} % load (first send to last arrival) | {:.0} µs: server {:.0} (SQLite's threads {:.0}) · Postgres {:.0} · the bench's generator and receiver {:.0} | | | |",
            l.load * 100.0,
            c.total_us(),
            c.server_us,
            c.sqlite_us,
            c.postgres_us,
            c.receiver_us
        );
        if let Some(w) = &l.wal {
            let _ = writeln!(
                o,
                "| WAL per delivery at {:.0} % load (ingest and delivery together, first send to last arrival; pg_stat_wal, the whole server) | {} | | | |",
                l.load * 100.0,
                wal::describe(Some(w))
            );
        }
        let _ = writeln!(
            o,
            "| The disk at {:.0} % load (/proc/diskstats, every whole disk; first send to last arrival) | {} | | | |",
            l.load * 100.0,
            disk::describe(l.disk.as_ref())
        );
        if let Some(s) = &l.statements {
            let _ = writeln!(
                o,
                "| Postgres's statements at {:.0} % load (pg_stat_statements, the whole database, first send to last arrival; time a delivery, the costliest first) | {s} | | | |",
                l.load * 100.0
            );
        }
        let _ = writeln!(
            o,
            "| When the slowest 1 % were sent at {:.0} % load (deliveries over the p99, by their event's scheduled send, in bursts ≤ {} ms apart) | {} | | | |",
            l.load * 100.0,
            (delivery::SLOW_BURST_APART * 1000.0) as u32,
            slow_bursts(&l.slow)
        );
        if let Some(m) = &l.maintenance {
            let _ = writeln!(
                o,
                "| Postgres's vacuums and analyzes at {:.0} % load (pg_stat_user_tables; times from the first send, ± 0.1 s) | {m} | | | |",
                l.load * 100.0
            );
        }
        let _ = writeln!(
            o,
            "| Server's view at {:.0} % load (its /metrics) | {} | | | |",
            l.load * 100.0,
            steps(&l.view, r.backend)
        );
    }
    let _ = writeln!(
        o,
        "| Server CPU per API request (GET /healthz, before the backlog is queued) | {:.0} µs on a new connection each · {:.0} µs on one kept-alive connection | | | |",
        d.per_request.new_connection_us, d.per_request.kept_alive_us
    );
    let _ = writeln!(
        o,
        "| RSS idle | {:.1} MiB (anonymous {:.1} · file pages {:.1}, which follow the page cache) | | ≤ 32 MiB | {} |",
        d.idle_mib,
        d.idle_split_mib.0,
        d.idle_split_mib.1,
        yes(d.idle_mib <= 32.0)
    );
    let _ = writeln!(
        o,
        "| RSS, {} queued, {} in flight | {:.1} MiB (anonymous {:.1} · file pages {:.1}) | | ≤ 128 MiB | {} |",
        r.events * r.endpoints,
        d.in_flight_seen,
        d.queued_mib,
        d.queued_split_mib.0,
        d.queued_split_mib.1,
        yes(d.queued_mib <= 128.0)
    );
    let _ = writeln!(
        o,
        "| Peak RSS over the burn-down | {:.1} MiB | | | |",
        d.burn_peak_mib
    );
}

/// Ingest over HTTP, alone and with delivery at once.
fn ingest_rows(o: &mut String, r: &Run, i: &ingest::Figures) {
    let (alone_goal, mixed_goal) = match r.backend {
        Backend::Sqlite => (1500.0, 1000.0),
        Backend::Postgres(_) => (2000.0, 1000.0),
    };
    let _ = writeln!(
        o,
        "| Ingest alone ({} events, fan-out {}, {} keep-alive producers, no workers) | {:.0} events/s ({:.0} deliveries/s) | CPU per event: server {:.0} µs (SQLite's threads {:.0}) · Postgres {:.0} µs · producers {:.0} µs | ≥ {alone_goal:.0} events/s | {} |",
        i.events,
        ingest::FAN_OUT,
        ingest::PRODUCERS,
        i.alone_per_sec,
        i.alone_per_sec * ingest::FAN_OUT as f64,
        i.alone_cpu.server_us * ingest::FAN_OUT as f64,
        i.alone_cpu.sqlite_us * ingest::FAN_OUT as f64,
        i.alone_cpu.postgres_us * ingest::FAN_OUT as f64,
        i.alone_cpu.receiver_us * ingest::FAN_OUT as f64,
        yes(i.alone_per_sec >= alone_goal)
    );
    let m = &i.mixed;
    let _ = writeln!(
        o,
        "| Mixed load: ingest while the same node delivers | {:.0} events/s ingested · {:.0} deliveries/s end to end · {} deliveries queued when posting ended, the last delivered {:.2} s later | | ≥ {mixed_goal:.0} events/s without falling behind (< 1 s) | {} |",
        m.per_sec,
        m.deliveries_per_sec,
        m.left,
        m.behind.as_secs_f64(),
        yes(m.per_sec >= mixed_goal && m.behind < Duration::from_secs(1))
    );
    let p = &i.paced;
    let on_time = p.late < Duration::from_secs(1) && p.behind < Duration::from_secs(1);
    let _ = writeln!(
        o,
        "| Mixed load paced at {:.0} events/s (open loop, fan-out {}; the same node) | {:.0} events/s ingested, the last post answered {:.2} s after its time · {:.0} deliveries/s end to end · {} deliveries queued when posting ended, the last delivered {:.2} s later | | ≥ {mixed_goal:.0} events/s without falling behind (< 1 s) | {} |",
        ingest::PACED_PER_SEC,
        ingest::FAN_OUT,
        p.per_sec,
        p.late.as_secs_f64(),
        p.deliveries_per_sec,
        p.left,
        p.behind.as_secs_f64(),
        yes(ingest::PACED_PER_SEC >= mixed_goal && on_time)
    );
}

/// Claims alone, by how many claimers run at once.
fn claim_rows(o: &mut String, c: &claims::Figures) {
    let one = c.runs.first().map_or(0.0, |r| r.1);
    for (claimers, per_sec, calls) in &c.runs {
        let ratio = per_sec / one.max(1e-9);
        let (goal, met) = if *claimers == 16 {
            ("≥ 4 × one claimer", yes(ratio >= 4.0))
        } else {
            ("", "")
        };
        let _ = writeln!(
            o,
            "| Claims alone, {claimers} claimer(s), {} queued over {} endpoints | {per_sec:.0} deliveries/s ({calls:.0} claims of ≤ 100/s) | {ratio:.2} × one claimer | {goal} | {met} |",
            c.queued, c.endpoints
        );
    }
    let (per_sec, calls) = c.with_rules;
    let _ = writeln!(
        o,
        "| Claims alone, 1 claimer, a default rate limit and a per-host cap on (too high to bind) | {per_sec:.0} deliveries/s ({calls:.0} claims of ≤ 100/s) | {:.2} × without them | | |",
        per_sec / one.max(1e-9)
    );
}

/// graphile-worker's burn-down beside Dakghar's of the same size, and
/// beside the full one when it ran.
fn peer_rows(
    o: &mut String,
    theirs: &peer::PeerRun,
    ours: &delivery::Burn,
    full: Option<&delivery::Figures>,
) {
    let ratio = ours.per_sec / theirs.per_sec.max(1e-9);
    let _ = writeln!(
        o,
        "| Burn-down of {} (5 000 events × 10 endpoints) | {:.0} deliveries/s · {:.0} µs machine CPU each (server {:.0} · Postgres {:.0} · receiver {:.0}) · peak RSS {:.1} MiB · WAL a delivery {} | {ratio:.2} × graphile-worker | ≥ 2 × graphile-worker | {} |",
        ours.burned,
        ours.per_sec,
        ours.cpu.total_us(),
        ours.cpu.server_us,
        ours.cpu.postgres_us,
        ours.cpu.receiver_us,
        ours.peak_mib,
        wal::describe(ours.wal.as_ref()),
        yes(ratio >= 2.0)
    );
    let _ = writeln!(
        o,
        "| Peer: graphile-worker 0.17.3, the same backlog ({} jobs), receiver and Postgres (local queue 500, batched completion) | {:.0} deliveries/s · {:.0} µs machine CPU each (worker {:.0} · Postgres {:.0} · receiver {:.0}) · peak RSS {:.1} MiB · WAL a job {} | | | |",
        theirs.deliveries,
        theirs.per_sec,
        theirs.cpu.total_us(),
        theirs.cpu.server_us,
        theirs.cpu.postgres_us,
        theirs.cpu.receiver_us,
        theirs.peak_rss_mib,
        wal::describe(theirs.wal.as_ref()),
    );
    if let Some(d) = full {
        let ratio = d.burn_per_sec / theirs.per_sec.max(1e-9);
        let _ = writeln!(
            o,
            "| The full burn-down against the peer | {:.0} deliveries/s | {ratio:.2} × graphile-worker | ≥ 2 × graphile-worker | {} |",
            d.burn_per_sec,
            yes(ratio >= 2.0)
        );
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpu}, {} cores", cores())
}

/// The server's step means, named.
fn steps(view: &delivery::View, backend: &Backend) -> String {
    let ms = &view.steps_ms;
    let [by_ingest, by_claims] = view.leased;
    let means = format!(
        "means: due → attempt start {:.2} ms · request {:.2} ms · ingest transaction {:.2} ms · claim {:.2} ms · result commit wait {:.2} ms; leased by their ingest {:.0}, by claims {:.0}",
        ms[0], ms[1], ms[2], ms[3], ms[4], by_ingest, by_claims
    );
    match backend {
        Backend::Sqlite => format!(
            "{means}; the one write connection held {:.0} % of the time ({:.0} holds a second)",
            view.writer_held * 100.0,
            view.writer_holds_per_sec
        ),
        Backend::Postgres(_) => means,
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// The server's commit: `BENCH_COMMIT` names it when `BENCH_SERVER` runs
/// another build's.
fn commit() -> String {
    if let Ok(named) = std::env::var("BENCH_COMMIT") {
        return named;
    }
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}
