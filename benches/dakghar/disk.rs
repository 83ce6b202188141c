//! The disk over a phase, from /proc/diskstats (every whole disk): how
//! busy it was, its slowest writes and the longest it held requests
//! without finishing one.
//! On Postgres every ingest and result commit waits for a WAL flush, so a
//! disk that stops stops deliveries. A copy of the bench's growing server
//! log every 5 s beside a run (a session's own harness, not the bench)
//! held this machine's disk for up to 0.45 s at a time: every ~5.3 s the
//! deliveries stopped for ~130 ms, and the 10 % phase's p99 was 85 ms
//! against 10-12 without it (bench/HISTORY.md, thirty-sixth pass). Like
//! steal, this says whether a figure is the code's or the machine's.

use std::{
    path::Path,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread,
    time::{Duration, Instant},
};

/// Short enough to see a stall of the size that mattered (~0.1 s).
const EVERY: Duration = Duration::from_millis(20);

#[derive(Clone, Default)]
struct Counters {
    /// Reads and writes finished.
    done: u64,
    writes: u64,
    sectors_written: u64,
    write_ms: u64,
    /// Requests sent to the disk and not finished, now.
    waiting: u64,
    /// Each disk's own, by name: summed, two disks busy at once would
    /// read as more than the whole span.
    busy_ms: Vec<(String, u64)>,
}

/// The counters of `disks` (named once, when the watch starts: a stat a
/// line every 20 ms is work the bench's own cores would pay).
fn read(disks: &[String]) -> Option<Counters> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    let mut sum = Counters::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 14 || !disks.iter().any(|d| d == f[2]) {
            continue;
        }
        let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
        sum.done += n(3) + n(7);
        sum.writes += n(7);
        sum.sectors_written += n(9);
        sum.write_ms += n(10);
        sum.waiting += n(11);
        sum.busy_ms.push((f[2].to_string(), n(12)));
    }
    Some(sum)
}

fn whole_disks() -> Option<Vec<String>> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    Some(
        text.lines()
            .filter_map(|line| line.split_whitespace().nth(2))
            .filter(|name| whole_disk(name))
            .map(str::to_string)
            .collect(),
    )
}

/// A disk of its own: not a partition, a loop file or RAM, nor a mapping
/// over other disks (whose requests would count twice).
fn whole_disk(name: &str) -> bool {
    !["loop", "ram", "zram", "dm-", "md"]
        .iter()
        .any(|p| name.starts_with(p))
        && Path::new("/sys/block").join(name).exists()
}

pub struct Figures {
    /// The share of the span some request was at the busiest disk.
    pub busy: f64,
    pub writes_per_sec: f64,
    pub mib_written_per_sec: f64,
    pub ms_a_write: f64,
    /// The mean time of the writes that finished within the slowest
    /// `EVERY`. A disk that still finishes requests can keep a flush
    /// waiting: beside the log copy a run's disk never stopped for long
    /// (`longest_stall` 0.00-0.03 s over its burn-down and phases), yet
    /// writes took 50-108 ms in twenty 50 ms spells against at most 33
    /// without it, and its 10 % phase's p99 was 71 ms.
    pub slowest_writes_ms: f64,
    /// The longest the disk held requests and finished none.
    pub longest_stall: Duration,
}

/// Samples the disk from now until `finish`, on a thread of its own so
/// that a busy runtime does not stretch the gaps it measures.
pub struct Watch {
    stop: Arc<AtomicBool>,
    sampler: thread::JoinHandle<Option<Figures>>,
}

pub fn watch() -> Watch {
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let sampler = thread::spawn(move || {
        let disks = whole_disks()?;
        let start = Instant::now();
        let first = read(&disks)?;
        let (mut last, mut moved_at, mut longest) = (first.clone(), start, Duration::ZERO);
        let mut slowest_writes_ms: f64 = 0.0;
        while !stopped.load(Ordering::Relaxed) {
            thread::sleep(EVERY);
            let now = read(&disks)?;
            let at = Instant::now();
            let writes = now.writes.saturating_sub(last.writes);
            if writes > 0 {
                let ms = now.write_ms.saturating_sub(last.write_ms) as f64 / writes as f64;
                slowest_writes_ms = slowest_writes_ms.max(ms);
            }
            if now.done != last.done || now.waiting == 0 {
                moved_at = at;
            } else {
                longest = longest.max(at - moved_at);
            }
            last = now;
        }
        let secs = start.elapsed().as_secs_f64();
        let writes = last.writes.saturating_sub(first.writes);
        let sectors = last.sectors_written.saturating_sub(first.sectors_written);
        let busiest_ms = last
            .busy_ms
            .iter()
            .map(|(disk, ms)| {
                let before = first.busy_ms.iter().find(|(d, _)| d == disk);
                ms.saturating_sub(before.map_or(*ms, |(_, b)| *b))
            })
            .max()
            .unwrap_or(0);
        Some(Figures {
            busy: busiest_ms as f64 / 1000.0 / secs,
            writes_per_sec: writes as f64 / secs,
            mib_written_per_sec: sectors as f64 * 512.0 / (1024.0 * 1024.0) / secs,
            ms_a_write: last.write_ms.saturating_sub(first.write_ms) as f64 / writes.max(1) as f64,
            slowest_writes_ms,
            longest_stall: longest,
        })
    });
    Watch { stop, sampler }
}

impl Watch {
    /// `None` where /proc/diskstats cannot be read.
    pub fn finish(self) -> Option<Figures> {
        self.stop.store(true, Ordering::Relaxed);
        self.sampler.join().ok().flatten()
    }
}

pub fn describe(d: Option<&Figures>) -> String {
    match d {
        None => "–".into(),
        Some(d) => format!(
            "busy {:.0} % (the busiest disk) · {:.0} writes/s ({:.1} MiB/s), {:.2} ms each on average · the slowest 20 ms's writes {:.1} ms each · the longest it held requests and finished none: {:.2} s",
            d.busy * 100.0,
            d.writes_per_sec,
            d.mib_written_per_sec,
            d.ms_a_write,
            d.slowest_writes_ms,
            d.longest_stall.as_secs_f64()
        ),
    }
}
