//! The real `dakghar serve` process: what it logs about a delivery, and
//! that no secret, signature, API key or payload ever reaches the log.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{Arc, Condvar, Mutex},
    time::Duration,
};

use serde_json::{json, Value};

use crate::receiver::Receiver;

const BIN: &str = env!("CARGO_BIN_EXE_dakghar");
const SECRETS_KEY: &str = "bG9nIHRlc3Qgc2VjcmV0cyBrZXksIDMyIGJ5dGVzISE=";
const PASSWORD: &str = "log test password 5d1e";

fn run(db: &str, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("DATABASE_URL")
        .env("DAKGHAR_DATABASE_URL", db)
        .env("RUST_LOG", "off")
        .output()
        .expect("run dakghar");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A SQLite database `file` in `dir` with the account acme and an API key
/// of it: the database's URL and the key.
fn acme_with_a_key(dir: &tempfile::TempDir, file: &str) -> (String, String) {
    let db = format!("sqlite://{}", dir.path().join(file).display());
    run(&db, &["account", "create", "--name", "acme"]);
    let key = run(&db, &["api-key", "create", "--account", "acme"]);
    (db, key)
}

/// Posts an `invoice.paid` event with `payload` through the API; it must
/// be accepted.
async fn post_event(http: &reqwest::Client, base: &str, key: &str, payload: Value) {
    let res = http
        .post(format!("{base}/api/v1/events"))
        .bearer_auth(key)
        .json(&json!({ "type": "invoice.paid", "payload": payload }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), reqwest::StatusCode::ACCEPTED);
}

/// The server's log so far, collected from stderr by a thread, which
/// stops reading while the gate is shut.
struct Server {
    child: Child,
    log: Arc<Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl Server {
    fn start(db: &str) -> Server {
        // The most a curious operator would turn on.
        Server::start_logging(db, "debug")
    }

    fn start_logging(db: &str, rust_log: &str) -> Server {
        let mut child = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(["--allow-subnets", "127.0.0.1/32"])
            .env_remove("DATABASE_URL")
            .env("DAKGHAR_DATABASE_URL", db)
            .env("DAKGHAR_SECRETS_KEY", SECRETS_KEY)
            // A throttled first attempt comes back within seconds.
            .env("DAKGHAR_RETRY_BASE_DELAY", "1s")
            .env("RUST_LOG", rust_log)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start dakghar serve");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        let gate = Arc::new((Mutex::new(true), Condvar::new()));
        let open = Arc::clone(&gate);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
                drop(log);
                let (is_open, turned) = &*open;
                let _open = turned
                    .wait_while(is_open.lock().unwrap(), |is_open| !*is_open)
                    .unwrap();
            }
        });
        Server {
            child,
            log,
            reader,
            gate,
        }
    }

    /// Stops (false) or resumes (true) reading the server's stderr: once
    /// the pipe is full, the server's writes to it wait.
    fn read_log(&self, open: bool) {
        let (is_open, turned) = &*self.gate;
        *is_open.lock().unwrap() = open;
        turned.notify_all();
    }

    /// The base URL, once the server says it is serving.
    async fn address(&self) -> String {
        let serving = self.wait_for_log("is serving").await;
        serving
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .expect("the address")
            .trim_end_matches('/')
            .to_string()
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    async fn wait_for_log(&self, what: &str) -> String {
        for _ in 0..3000 {
            let log = self.log();
            if let Some(line) = log.lines().find(|l| l.contains(what)) {
                return line.to_string();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no log line with {what:?} in:\n{}", self.log());
    }

    /// What a service manager does: SIGTERM, then wait for a clean exit.
    fn terminate(mut self) -> String {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "clean exit on SIGTERM: {status}");
        // The reader ends at the pipe's end of file: every line is in.
        self.reader.join().unwrap();
        let log = self.log.lock().unwrap().clone();
        log
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_are_logged_without_secrets_signatures_keys_or_payloads() {
    let dir = tempfile::tempdir().unwrap();
    let (db, key) = acme_with_a_key(&dir, "logs.db");
    run(
        &db,
        &[
            "user",
            "create",
            "--email",
            "ana@acme.example",
            "--account",
            "acme",
            "--password",
            PASSWORD,
        ],
    );

    let server = Server::start(&db);
    let base = server.address().await;

    let rx = Receiver::start().await;
    rx.script_with_headers(429, vec![("retry-after", "1".to_string())]);
    let http = reqwest::Client::new();
    let endpoint: Value = http
        .post(format!("{base}/api/v1/endpoints"))
        .bearer_auth(&key)
        .json(&json!({ "url": rx.url }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let secret = endpoint["secret"].as_str().expect("a secret").to_string();
    let marker = "payload-marker-3f9c1b";
    post_event(&http, &base, &key, json!({ "note": marker })).await;

    let browser = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for password in ["a wrong password 77aa", PASSWORD] {
        let res = browser
            .post(format!("{base}/login"))
            .form(&[("email", "ana@acme.example"), ("password", password)])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), reqwest::StatusCode::SEE_OTHER);
    }
    server.wait_for_log("signed in").await;

    rx.wait_for(2).await;
    let throttled = server.wait_for_log("engine: attempt ").await;
    let attempt = server.wait_for_log("outcome=delivered").await;
    let finished = server.wait_for_log("delivery finished").await;
    let log = server.terminate();

    for part in [
        "delivery=",
        "method=POST",
        "host=127.0.0.1",
        "status=429",
        "retry_after=1 ",
        "next_attempt_at=20",
        "outcome=transient",
    ] {
        assert!(throttled.contains(part), "{part} in {throttled}");
    }
    for part in [
        "engine: attempt ",
        "status=200",
        "duration_ms=",
        "retry_after=none",
        "next_attempt_at=none",
    ] {
        assert!(attempt.contains(part), "{part} in {attempt}");
    }
    assert!(
        log.contains("endpoint throttled"),
        "the throttle is logged:\n{log}"
    );
    assert!(finished.contains("state=\"delivered\""), "{finished}");

    let signature = rx.got()[0].headers["webhook-signature"]
        .to_str()
        .unwrap()
        .to_string();
    let signature_b64 = signature.trim_start_matches("v1,");
    let secret_b64 = secret.trim_start_matches("whsec_");
    for (what, needle) in [
        ("the API key", key.as_str()),
        ("the endpoint secret", secret_b64),
        ("the signature", signature_b64),
        ("the payload", marker),
        ("the secrets key", SECRETS_KEY),
        ("the password", PASSWORD),
        ("the wrong password", "a wrong password 77aa"),
    ] {
        assert!(!log.contains(needle), "{what} leaked into the log:\n{log}");
    }
    assert!(
        !log.to_lowercase().contains("bearer"),
        "an Authorization header leaked:\n{log}"
    );

    // At rest: the database files hold the sealed secret, never the secret.
    let mut stored = Vec::new();
    for file in ["logs.db", "logs.db-wal"] {
        stored.extend(std::fs::read(dir.path().join(file)).unwrap_or_default());
    }
    let stored = String::from_utf8_lossy(&stored);
    assert!(stored.contains(dakghar::sealing::PREFIX));
    assert!(
        !stored.contains(secret_b64),
        "the secret is in the database file"
    );
    assert!(
        !stored.contains(&key),
        "the API key is in the database file"
    );

    // Another key does not open those secrets: the server refuses to start.
    let refused = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("DATABASE_URL")
        .env("DAKGHAR_DATABASE_URL", &db)
        .env(
            "DAKGHAR_SECRETS_KEY",
            "b3RoZXIga2V5LCBhbHNvIDMyIGJ5dGVzIGxvbmchISE=",
        )
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("does not open with this secrets key"),
        "{said}"
    );
}

/// Every attempt logs a line. A log reader that stops (a stalled pipe to
/// a log shipper) must not stop deliveries: the lines wait in the
/// server's buffer, and all of them come out once it reads again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_reader_that_stops_reading_holds_up_no_delivery_and_loses_no_line() {
    let dir = tempfile::tempdir().unwrap();
    let (db, key) = acme_with_a_key(&dir, "stalled.db");

    let server = Server::start_logging(&db, "info");
    let base = server.address().await;
    let rx = Receiver::start().await;
    // A server whose every thread waits on its stderr answers nothing: a
    // bound, so that fails the test rather than hanging it.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    for _ in 0..ENDPOINTS {
        let res = http
            .post(format!("{base}/api/v1/endpoints"))
            .bearer_auth(&key)
            .json(&json!({ "url": rx.url }))
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "{}", res.status());
    }

    // The pipe holds 64 KiB; the attempts' lines are about 250 bytes
    // each, so 600 of them fill it more than twice over.
    server.read_log(false);
    for i in 0..EVENTS {
        post_event(&http, &base, &key, json!({ "n": i })).await;
    }
    rx.wait_for(EVENTS * ENDPOINTS).await;

    server.read_log(true);
    let log = server.terminate();
    let attempts = log
        .lines()
        .filter(|l| l.contains("engine: attempt ") && l.contains("outcome=delivered"))
        .count();
    assert_eq!(
        attempts,
        EVENTS * ENDPOINTS,
        "every attempt's line came out"
    );
}

const ENDPOINTS: usize = 10;
const EVENTS: usize = 60;
