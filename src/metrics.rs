//! Prometheus metrics (SPEC §6) at `/metrics`: counters and histograms
//! the engine records as it works, plus queue gauges read at scrape time.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::{
    clock::Timestamp,
    store::{QueueGauges, Store, StoreError},
};

/// Buckets in seconds, from a fast local receiver to the request timeout.
const REQUEST_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0,
];
/// Buckets in seconds, from "at once" to the whole retry window.
const DELAY_BUCKETS: &[f64] = &[
    0.01,
    0.1,
    1.0,
    10.0,
    60.0,
    300.0,
    900.0,
    3600.0,
    4.0 * 3600.0,
    24.0 * 3600.0,
    72.0 * 3600.0,
];

/// Buckets in seconds for one database step (`dakghar_db_*`): a local
/// commit is well under a millisecond, a contended one tens.
const DB_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
];

/// One recorder per process: the `metrics` facade is global, and several
/// servers in one test process share it.
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("request_seconds".into()), REQUEST_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Suffix("delay_seconds".into()), DELAY_BUCKETS)
            })
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Prefix("dakghar_db_".into()), DB_BUCKETS)
            })
            .expect("static bucket lists are valid");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        // Another recorder may already be installed (a test harness); then
        // this handle still renders what was recorded through it.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

pub fn describe() {
    use metrics::{describe_counter, describe_histogram, Unit};
    describe_counter!(
        "dakghar_attempts_total",
        "Delivery attempts by outcome and status class"
    );
    describe_counter!(
        "dakghar_dead_lettered_total",
        "Deliveries that ended failed or expired, by reason"
    );
    describe_counter!("dakghar_retries_total", "Attempts that scheduled a retry");
    describe_counter!(
        "dakghar_leased_total",
        "Deliveries leased for this node's workers: by=\"ingest\" by the ingest that made them due, by=\"claim\" by a claim loop"
    );
    describe_counter!(
        "dakghar_delivered_after_retry_total",
        "Deliveries that succeeded after at least one failed attempt"
    );
    describe_counter!(
        "dakghar_resends_total",
        "Single resends (API and dashboard)"
    );
    describe_counter!("dakghar_replays_total", "Bulk replays started");
    describe_counter!(
        "dakghar_replayed_deliveries_total",
        "Deliveries reset by bulk replays"
    );
    describe_histogram!(
        "dakghar_request_seconds",
        Unit::Seconds,
        "Time from sending a delivery to its answer"
    );
    describe_histogram!(
        "dakghar_attempt_delay_seconds",
        Unit::Seconds,
        "How late an attempt started after it was due"
    );
    describe_histogram!(
        "dakghar_delivery_delay_seconds",
        Unit::Seconds,
        "Time from ingest to successful delivery"
    );
    describe_histogram!(
        "dakghar_db_ingest_seconds",
        Unit::Seconds,
        "An event stored with its deliveries: the wait for its group's ingest transaction included"
    );
    describe_histogram!(
        "dakghar_db_claim_seconds",
        Unit::Seconds,
        "One claim: its endpoints locked, their free slots counted, the rows leased"
    );
    describe_histogram!(
        "dakghar_db_record_seconds",
        Unit::Seconds,
        "From an attempt's answer to its result committed (group commit)"
    );
    describe_histogram!(
        "dakghar_db_writer_hold_seconds",
        Unit::Seconds,
        "SQLite (0 on Postgres): how long each hold of the node's one write connection lasted, from its handover; it carries ingest, claims and results, and the sum's rate is the share of the time it was busy (near 1: they queue for it)"
    );
    describe_counter!(
        "dakghar_throttles_total",
        "429/503 answers that held a whole endpoint, by status"
    );
    describe_counter!(
        "dakghar_in_flight_cap_cuts_total",
        "Times an endpoint's adaptive in-flight cap was halved (429, 503, timeout)"
    );
}

/// Every counter and histogram at zero from the start: a `rate()` or an
/// alert on a quiet node has a series to read before the first attempt.
pub fn start_at_zero() {
    use metrics::{counter, histogram};
    let classes = ["2xx", "3xx", "4xx", "5xx", "none"];
    for outcome in ["transient", "ambiguous", "permanent", "gone"] {
        for class in classes {
            counter!("dakghar_attempts_total", "outcome" => outcome, "status_class" => class)
                .absolute(0);
        }
    }
    counter!("dakghar_attempts_total", "outcome" => "delivered", "status_class" => "2xx")
        .absolute(0);
    counter!("dakghar_attempts_total", "outcome" => "blocked", "status_class" => "none")
        .absolute(0);
    for reason in ["failed", "expired"] {
        counter!("dakghar_dead_lettered_total", "reason" => reason).absolute(0);
    }
    for status in ["429", "503"] {
        counter!("dakghar_throttles_total", "status" => status).absolute(0);
    }
    for by in ["ingest", "claim"] {
        counter!("dakghar_leased_total", "by" => by).absolute(0);
    }
    for name in [
        "dakghar_retries_total",
        "dakghar_delivered_after_retry_total",
        "dakghar_resends_total",
        "dakghar_replays_total",
        "dakghar_replayed_deliveries_total",
        "dakghar_in_flight_cap_cuts_total",
    ] {
        counter!(name).absolute(0);
    }
    for name in [
        "dakghar_request_seconds",
        "dakghar_attempt_delay_seconds",
        "dakghar_delivery_delay_seconds",
        "dakghar_db_ingest_seconds",
        "dakghar_db_claim_seconds",
        "dakghar_db_record_seconds",
        "dakghar_db_writer_hold_seconds",
    ] {
        // Registered without a sample: its buckets, sum and count render at 0.
        drop(histogram!(name));
    }
}

/// Runs `work` and records how long it took in the histogram `name`,
/// whatever it returned.
pub async fn timed<T>(name: &'static str, work: impl std::future::Future<Output = T>) -> T {
    let started = std::time::Instant::now();
    let out = work.await;
    metrics::histogram!(name).record(started.elapsed().as_secs_f64());
    out
}

/// The status class label: `2xx` … `5xx`, or `none` without a response.
pub fn status_class(status: Option<u16>) -> &'static str {
    match status {
        Some(200..=299) => "2xx",
        Some(300..=399) => "3xx",
        Some(400..=499) => "4xx",
        Some(500..=599) => "5xx",
        Some(_) => "other",
        None => "none",
    }
}

/// The queue counts read last and when: a scraper (or anyone who can
/// reach /metrics) asking in a loop costs the database a read a second at
/// most. Real time, not the code's clock: this is a rate, not a deadline.
#[derive(Debug, Default)]
pub struct GaugeCache(tokio::sync::Mutex<Option<(std::time::Instant, QueueGauges)>>);

const GAUGES_FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(1);

impl GaugeCache {
    async fn read(&self, store: &Store, now: Timestamp) -> Result<QueueGauges, StoreError> {
        // Held while reading, so scrapes that arrive together share one read.
        let mut last = self.0.lock().await;
        if let Some((at, g)) = last.as_ref() {
            if at.elapsed() < GAUGES_FRESH_FOR {
                return Ok(g.clone());
            }
        }
        let g = store.queue_gauges(now).await?;
        *last = Some((std::time::Instant::now(), g.clone()));
        Ok(g)
    }
}

/// One gauge family in the exposition format; `values` are (label, value),
/// the label empty for none.
fn write_gauge(text: &mut String, name: &str, help: &str, values: &[(&str, i64)]) {
    use metrics_exporter_prometheus::formatting::{
        write_help_line, write_metric_line, write_type_line,
    };
    write_help_line(text, name, help);
    write_type_line(text, name, "gauge");
    for (label, value) in values {
        let labels: Vec<String> = Some(label.to_string())
            .filter(|l| !l.is_empty())
            .into_iter()
            .collect();
        write_metric_line::<&str, i64>(text, name, None, &labels, None, *value, None);
    }
    text.push('\n');
}

/// Everything recorded, then the queue gauges read from `store` (at most
/// a second old). The gauges are rendered per server from its own
/// database, not through the process's one recorder: two servers in one
/// process (the tests) showed each other's counts. Without them when the
/// read fails: an absent series says "unknown", a stale one would not.
pub async fn render(store: &Store, cache: &GaugeCache, now: Timestamp) -> String {
    let mut text = handle().render();
    match cache.read(store, now).await {
        Ok(g) => {
            write_gauge(
                &mut text,
                "dakghar_queue_depth",
                "Deliveries waiting (pending) or being sent (in_flight)",
                &[
                    ("state=\"pending\"", g.pending),
                    ("state=\"in_flight\"", g.in_flight),
                ],
            );
            write_gauge(
                &mut text,
                "dakghar_circuits_open",
                "Endpoints whose circuit breaker is open",
                &[("", g.circuits_open)],
            );
            write_gauge(
                &mut text,
                "dakghar_endpoints_throttled",
                "Endpoints whose receiver asked (429/503) to hold all deliveries for now",
                &[("", g.throttled)],
            );
            write_gauge(
                &mut text,
                "dakghar_endpoints_in_flight_capped",
                "Endpoints whose adaptive in-flight cap is below max_in_flight (the receiver showed overload)",
                &[("", g.capped)],
            );
        }
        Err(e) => tracing::warn!(error = %e, "could not read queue gauges for /metrics"),
    }
    text
}
