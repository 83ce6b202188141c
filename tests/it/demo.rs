//! `dakghar demo`, the real binary: it prints a login that works, and the
//! dashboard fills with live traffic from its built-in receiver.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::Value;

use crate::helpers::browser;

const BIN: &str = env!("CARGO_BIN_EXE_dakghar");

struct Demo {
    child: Child,
    base: String,
    email: String,
    password: String,
}

fn start(db: &str) -> Demo {
    let mut child = Command::new(BIN)
        .args(["demo", "--listen", "127.0.0.1:0"])
        .env_remove("DATABASE_URL")
        .env("DAKGHAR_DATABASE_URL", db)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start dakghar demo");
    let stdout = child.stdout.take().unwrap();
    let (mut email, mut password, mut base) = (String::new(), String::new(), String::new());
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        let line = line.trim().to_string();
        if let Some(v) = line.strip_prefix("email:") {
            email = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("password:") {
            password = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("sign in:") {
            base = v.trim().trim_end_matches("/login").to_string();
            break;
        }
    }
    assert!(
        !base.is_empty() && !password.is_empty(),
        "the demo prints a login"
    );
    Demo {
        child,
        base,
        email,
        password,
    }
}

impl Demo {
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(self.child.wait().unwrap().success());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_prints_a_working_login_and_fills_the_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("demo.db").display());
    let demo = start(&db);
    let web = browser();
    let res = web
        .post(format!("{}/login", demo.base))
        .form(&[
            ("email", demo.email.as_str()),
            ("password", demo.password.as_str()),
            ("next", ""),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.headers()["location"],
        "/events",
        "the printed login works"
    );

    let call = |f: &'static str| {
        let req = web
            .post(format!("{}/_fn/{f}", demo.base))
            .header("accept", "application/json");
        async move { req.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let mut seen = (0, false, false);
    for _ in 0..200 {
        let events = call("events").await;
        let rows = events["rows"].as_array().cloned().unwrap_or_default();
        let delivered = rows
            .iter()
            .flat_map(|r| r["deliveries"].as_array().cloned().unwrap_or_default())
            .filter(|d| d["status"] == "Delivered")
            .count();
        let endpoints = call("endpoints").await;
        let paused = endpoints.as_array().unwrap().iter().any(|e| {
            e["condition"]["Paused"].is_object() && e["url"].as_str().unwrap().ends_with("/gone")
        });
        seen = (rows.len(), delivered > 0, paused);
        if seen.0 >= 3 && seen.1 && seen.2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        seen.0 >= 3 && seen.1,
        "events arrive and are delivered: {seen:?}"
    );
    assert!(seen.2, "the endpoint that answers 410 is paused: {seen:?}");
    let is_admin = call("me").await["is_admin"].as_bool();
    assert_eq!(is_admin, Some(true), "the demo user can open Admin");
    demo.stop();

    // A second start reuses the account and endpoints, with a new password.
    let again = start(&db);
    let web = browser();
    web.post(format!("{}/login", again.base))
        .form(&[
            ("email", again.email.as_str()),
            ("password", again.password.as_str()),
            ("next", ""),
        ])
        .send()
        .await
        .unwrap();
    let endpoints: Value = web
        .post(format!("{}/_fn/endpoints", again.base))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        endpoints.as_array().unwrap().len(),
        3,
        "no duplicates: {endpoints}"
    );
    again.stop();
}
