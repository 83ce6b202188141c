//! A flood of sign-ins against the real binary: argon2 takes 19 MiB and
//! tens of milliseconds of CPU a try, so the server checks one password per
//! core at a time, answers the rest busy, and keeps delivering meanwhile.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use reqwest::StatusCode;
use serde_json::json;

use crate::{
    helpers::{TestDb, TEST_SECRETS_KEY},
    receiver::Receiver,
    served::{free_port, tenant, Served, BIN},
};

on_both_backends_db!(six_hundred_sign_ins_at_once_cost_little_memory_and_delay_no_webhook);

/// The most memory the process ever held, from the kernel.
fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/pid/status");
    kib / 1024
}

async fn six_hundred_sign_ins_at_once_cost_little_memory_and_delay_no_webhook(db: &TestDb) {
    const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    let rx = Receiver::start().await;
    let key = tenant(&db.store, &rx.url, 10).await;
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let child = Command::new(BIN)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--allow-subnets", "127.0.0.1/32", "--retention", "off"])
        .args(["--connect-timeout", "5s"])
        .env_remove("DATABASE_URL")
        .env("DAKGHAR_DATABASE_URL", db.process_url())
        .env("DAKGHAR_SECRETS_KEY", TEST_SECRETS_KEY)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start dakghar serve");
    let server = Served(child);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while http.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(Instant::now() < deadline, "the server never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let flood: Vec<_> = (0..600)
        .map(|i| {
            let (http, url) = (http.clone(), format!("{base}/login"));
            tokio::spawn(async move {
                let email = format!("flood-{i}-{}@example.com", dakghar::ids::random_token(8));
                let res = http
                    .post(url)
                    .form(&[
                        ("email", email.as_str()),
                        ("password", "not the password"),
                        ("next", ""),
                    ])
                    .send()
                    .await
                    .expect("an answer");
                (res.status(), res.headers().get("retry-after").cloned())
            })
        })
        .collect();
    // A webhook sent while the flood is on.
    let sent = Instant::now();
    let res = http
        .post(format!("{base}/api/v1/events"))
        .bearer_auth(&key)
        .json(&json!({ "type": "t", "payload": { "during": "the flood" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    rx.wait_for(1).await;
    let took = sent.elapsed();

    let mut refused = 0;
    let mut busy = 0;
    for answer in flood {
        let (status, retry_after) = answer.await.unwrap();
        match status {
            StatusCode::SEE_OTHER => refused += 1,
            StatusCode::SERVICE_UNAVAILABLE => {
                assert_eq!(retry_after.unwrap(), "1");
                busy += 1;
            }
            other => panic!("a sign-in answered {other}"),
        }
    }
    let peak = peak_rss_mib(server.0.id());
    assert!(
        took < CONNECT_TIMEOUT,
        "the webhook took {took:?} to arrive during the flood"
    );
    assert!(peak < 512, "peak RSS {peak} MiB during 600 sign-ins");
    assert!(
        busy > 0,
        "the flood was answered busy in part: {refused} refused"
    );
    assert_eq!(refused + busy, 600);
}
