//! Where the CPU goes during the burn-down, from /proc: the server (its
//! SQLite threads apart), Postgres's processes, and this bench process
//! (which then only runs the receiver). Per delivery, this is the profile
//! that says what a faster burn-down would have to take time from.

use std::process::Command;

/// CPU seconds spent so far, per part.
#[derive(Clone, Copy, Default)]
pub struct Sample {
    server: f64,
    server_sqlite: f64,
    postgres: f64,
    bench: f64,
    machine: Machine,
}

/// The whole machine's CPU seconds so far (/proc/stat), all cores.
#[derive(Clone, Copy, Default)]
pub struct Machine {
    /// Busy, the host's steal included: what the machine could not give
    /// to anything else.
    busy: f64,
    /// Taken by the host for other guests (steal).
    stolen: f64,
    all: f64,
}

impl Machine {
    pub fn now() -> Self {
        let hz = ticks_per_sec();
        let Some(line) = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| t.lines().next().map(str::to_owned))
        else {
            return Machine::default();
        };
        let v: Vec<f64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal
        if v.len() < 8 {
            return Machine::default();
        }
        let busy = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz;
        Machine {
            busy,
            stolen: v[7] / hz,
            all: busy + (v[3] + v[4]) / hz,
        }
    }

    /// The share of all CPU time since `before` that the machine was busy.
    pub fn busy_since(&self, before: &Machine) -> f64 {
        self.share_since(before, |m| m.busy)
    }

    /// The share of all CPU time since `before` that the host took: on a
    /// shared host it comes in spells, and a run it hit says little about
    /// the build it ran (seen here: the same build's burn-down at 1 790/s
    /// in one spell and 7 251/s out of it).
    pub fn stolen_since(&self, before: &Machine) -> f64 {
        self.share_since(before, |m| m.stolen)
    }

    fn share_since(&self, before: &Machine, part: impl Fn(&Machine) -> f64) -> f64 {
        let all = self.all - before.all;
        if all > 0.0 {
            (part(self) - part(before)) / all
        } else {
            0.0
        }
    }
}

/// CPU per delivery between two samples, in microseconds.
#[derive(Clone, Copy, Default)]
pub struct PerDelivery {
    /// The server process, SQLite's threads included.
    pub server_us: f64,
    /// sqlx's SQLite worker threads, where SQLite itself runs.
    pub sqlite_us: f64,
    /// Every `postgres` process on this machine (0 when it runs elsewhere).
    pub postgres_us: f64,
    /// The receiver (this bench process).
    pub receiver_us: f64,
    /// How busy the whole machine was, 0..=1 of all its cores.
    pub machine_busy: f64,
    /// Of all its CPU time, the share the host took, 0..=1.
    pub stolen: f64,
}

impl Sample {
    /// CPU seconds of the server process so far.
    pub fn server(&self) -> f64 {
        self.server
    }
}

impl PerDelivery {
    pub fn total_us(&self) -> f64 {
        self.server_us + self.postgres_us + self.receiver_us
    }
}

// Asked once: every sample needs it, and asking runs a process.
fn ticks_per_sec() -> f64 {
    static HZ: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *HZ.get_or_init(ask_ticks_per_sec)
}

fn ask_ticks_per_sec() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// (comm, utime + stime in ticks) from a /proc stat file.
fn stat(path: &str) -> Option<(String, f64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text[open + 1..close].to_string();
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some((comm, ticks))
}

fn numbered(dir: &str) -> impl Iterator<Item = String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

pub fn sample(server_pid: u32) -> Sample {
    let hz = ticks_per_sec();
    let mut s = Sample::default();
    for tid in numbered(&format!("/proc/{server_pid}/task")) {
        if let Some((comm, ticks)) = stat(&format!("/proc/{server_pid}/task/{tid}/stat")) {
            s.server += ticks / hz;
            if comm.starts_with("sqlx-sqlite") {
                s.server_sqlite += ticks / hz;
            }
        }
    }
    for pid in numbered("/proc") {
        if let Some((comm, ticks)) = stat(&format!("/proc/{pid}/stat")) {
            if comm == "postgres" {
                s.postgres += ticks / hz;
            }
        }
    }
    s.bench = stat("/proc/self/stat").map_or(0.0, |(_, t)| t / hz);
    s.machine = Machine::now();
    s
}

pub fn per_delivery(before: Sample, after: Sample, deliveries: usize) -> PerDelivery {
    let us = |a: f64, b: f64| (b - a) * 1e6 / deliveries.max(1) as f64;
    PerDelivery {
        server_us: us(before.server, after.server),
        sqlite_us: us(before.server_sqlite, after.server_sqlite),
        postgres_us: us(before.postgres, after.postgres),
        receiver_us: us(before.bench, after.bench),
        machine_busy: after.machine.busy_since(&before.machine),
        stolen: after.machine.stolen_since(&before.machine),
    }
}
