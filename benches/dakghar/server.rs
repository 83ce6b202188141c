//! A real `dakghar serve` process, so memory is the server's own and the
//! engine runs exactly as shipped.

use std::{
    net::TcpListener,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

const BIN: &str = env!("CARGO_BIN_EXE_dakghar");

/// `BENCH_SERVER` runs another build's server (a copy of an earlier
/// commit's binary), so a before and an after alternate on one machine.
fn bin() -> String {
    std::env::var("BENCH_SERVER").unwrap_or_else(|_| BIN.to_string())
}

pub struct Server {
    child: Child,
    pub base: String,
}

impl Server {
    /// Starts a node on a free port and waits until it answers.
    pub async fn start(db_url: &str, extra: &[&str], log_dir: &Path) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let listen = format!("127.0.0.1:{port}");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_dir.join("server.log"))
            .unwrap();
        let child = Command::new(bin())
            .args(["serve", "--listen", &listen, "--retention", "off"])
            // The receiver runs on this machine.
            .args(["--allow-subnets", "127.0.0.1/32"])
            // Every bench endpoint is on that one receiver, and a
            // burn-down measures the engine, not the pacing a production
            // default puts on it (50 starts a second, 10 per host).
            .args(["--default-rate-limit", "unlimited"])
            .args(["--ingest-rate-limit", "unlimited"])
            .args(["--max-in-flight-per-host", "unlimited"])
            .args(extra)
            .env_remove("DATABASE_URL")
            .env("DAKGHAR_DATABASE_URL", db_url)
            .env("DAKGHAR_SECRETS_KEY", crate::db::SECRETS_KEY)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start dakghar serve");
        let server = Server {
            child,
            base: format!("http://{listen}"),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = reqwest::Client::new();
        loop {
            let up = client
                .get(format!("{}/healthz", server.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if up {
                return server;
            }
            assert!(Instant::now() < deadline, "the server did not come up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident and peak resident memory, in MiB, from /proc.
    pub fn memory(&self) -> (f64, f64) {
        self.status_mib(["VmRSS:", "VmHWM:"])
    }

    /// The resident set's anonymous memory and file pages, MiB. The file
    /// part (mostly the binary's own code) follows the page cache: a
    /// binary just built or copied is wholly cached and the kernel maps
    /// more of it around each page start-up touches.
    pub fn rss_split(&self) -> (f64, f64) {
        self.status_mib(["RssAnon:", "RssFile:"])
    }

    /// Two `/proc/<pid>/status` fields given in kB, in MiB (0 if absent),
    /// from one read of the file.
    fn status_mib(&self, names: [&str; 2]) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .unwrap_or(0.0)
                / 1024.0
        };
        (field(names[0]), field(names[1]))
    }

    /// SIGTERM, then waits for the graceful exit.
    pub async fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
