//! The shared context at the bottom of the server: what every request
//! handler, server function and domain action works with. It knows the
//! store, the clock, the configuration and the engine, and nothing above.

use std::sync::Arc;

use axum::extract::FromRef;
use leptos::prelude::LeptosOptions;

use crate::{
    auth::password,
    clock::SharedClock,
    config::ServeConfig,
    delivery::engine::Engine,
    store::{Ingester, KeyCache, KeyUses, Store},
};

/// The services every request handler and server function shares.
#[derive(Debug)]
pub struct Ctx {
    pub store: Store,
    pub clock: SharedClock,
    pub config: ServeConfig,
    pub engine: Arc<Engine>,
    /// Writes ingested events, a group per commit.
    pub ingester: Ingester,
    /// Wakes the mailer: someone waits for an email just queued.
    pub mail: Arc<tokio::sync::Notify>,
    pub key_uses: KeyUses,
    /// Keys seen here, for ingest (the write checks they are still active).
    pub keys: KeyCache,
    /// Turns at checking a password: sign-in floods wait here, briefly,
    /// or are answered busy.
    pub hashing: password::Gate,
    /// The queue counts `/metrics` read last, kept for a second.
    pub gauges: crate::metrics::GaugeCache,
    /// What each account has sent this second, against the ingest limit.
    pub ingest_rate: crate::auth::ingest_rate::IngestRate,
    /// Trace spans, exported when `--otlp-endpoint` names a collector.
    pub telemetry: Arc<crate::telemetry::Telemetry>,
}

impl Ctx {
    /// An absolute URL of this installation, for links that leave it.
    pub fn public_url(&self, path: &str) -> String {
        let base = self
            .config
            .public_url
            .as_deref()
            .unwrap_or("http://127.0.0.1");
        format!("{}{path}", base.trim_end_matches('/'))
    }

    /// Sends the outbox now rather than at the next round.
    pub fn mail_now(&self) {
        self.mail.notify_one();
    }
}

/// Cloned for every request (axum's `State` extractor, in each layer that
/// takes it), so it holds two `Arc`s: with `LeptosOptions` inline, its
/// half-dozen `Arc<str>` were counted up and down per request, and
/// dropping them was the top symbol of the server's runtime threads in
/// `perf` over the engine bench.
#[derive(Clone)]
pub struct AppState {
    pub leptos_options: Arc<LeptosOptions>,
    pub ctx: Arc<Ctx>,
}

/// leptos_axum's page routes take the options by value: only they clone.
impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        LeptosOptions::clone(&state.leptos_options)
    }
}

impl FromRef<AppState> for Arc<Ctx> {
    fn from_ref(state: &AppState) -> Self {
        Arc::clone(&state.ctx)
    }
}
