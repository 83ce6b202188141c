//! Configuration of `dakghar serve`, validated once at start-up.

use std::{net::SocketAddr, path::PathBuf};

use crate::{
    delivery::{settings::DeliverySettings, target_policy::TargetPolicy},
    jobs::{mailer::MailSettings, retention::RetentionSettings},
};

/// Everything the running server needs to know about its surroundings.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// Where cargo-leptos put the compiled stylesheet, JS and wasm (`pkg/`).
    pub site_root: PathBuf,
    /// Set the cookie's `Secure` flag: the dashboard is reached over https.
    pub secure_cookies: bool,
    pub delivery: DeliverySettings,
    /// Run the embedded delivery workers (tests drive the engine by hand).
    pub run_workers: bool,
    /// Serve the dashboard and the REST API; a worker-only node answers
    /// just `/healthz` and `/metrics`.
    pub serve_api: bool,
    /// Resends per endpoint per minute, API and dashboard together (SPEC §5).
    pub resends_per_minute: i64,
    pub retention: RetentionSettings,
    /// Alert emails by SMTP; without it they stay in the outbox.
    pub mail: Option<MailSettings>,
    pub sessions: SessionSettings,
}

/// How long a dashboard sign-in lasts.
#[derive(Debug, Clone, Copy)]
pub struct SessionSettings {
    /// Signed out after this long without a request.
    pub idle: std::time::Duration,
    /// Signed out this long after signing in, however busy.
    pub max_age: std::time::Duration,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            idle: std::time::Duration::from_secs(12 * 3600),
            max_age: std::time::Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl ServeConfig {
    /// Settings for a test server: any free port, no https.
    pub fn for_tests() -> Self {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            site_root: PathBuf::from("target/site"),
            secure_cookies: false,
            delivery: DeliverySettings {
                // Test receivers listen on 127.0.0.1; nothing else internal.
                targets: TargetPolicy {
                    allow_private: false,
                    allowed: vec![ipnet::IpNet::from(std::net::IpAddr::from([127, 0, 0, 1]))],
                },
                ..DeliverySettings::default()
            },
            run_workers: false,
            serve_api: true,
            resends_per_minute: 100,
            retention: RetentionSettings::default(),
            mail: None,
            sessions: SessionSettings::default(),
        }
    }
}
