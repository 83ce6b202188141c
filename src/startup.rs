//! The composition root: builds the application from its configuration
//! (store, engine, routes of both faces, session layer), runs it with its
//! jobs, and stops it in order. `serve` and `demo` start here.

use std::{future::Future, io, net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use axum::{extract::State, routing::get, serve::ListenerExt, Router};
use leptos::prelude::*;
use tokio::net::TcpListener;

use crate::{
    accounts, api,
    clock::SharedClock,
    config::ServeConfig,
    context::{AppState, Ctx},
    dashboard::{self, guard, protect, session, site_files::SiteFiles},
    delivery::engine::Engine,
    demo,
    jobs::{self, Jobs},
    sealing::{self, SecretsKey},
    store::{Store, StoreError, VacuumPolicy},
    telemetry::Telemetry,
};

pub struct Application {
    listener: TcpListener,
    /// `--metrics-listen`: its own listener and router.
    metrics: Option<(TcpListener, Router)>,
    /// This process as the database's `nodes` know it.
    node: crate::store::Node,
    router: Router,
    engine: Arc<Engine>,
    run_workers: bool,
    ctx: Arc<Ctx>,
    mailer: Option<crate::jobs::mailer::Mailer>,
}

impl Application {
    /// Binds the listener and wires the routes; `serve` starts answering.
    pub async fn build(
        config: ServeConfig,
        store: Store,
        clock: SharedClock,
    ) -> Result<Self, BuildError> {
        crate::metrics::handle();
        crate::metrics::describe();
        crate::metrics::start_at_zero();
        let node = crate::jobs::heartbeat::this_process(config.role(), clock.now().millis());
        let store = store.for_node(&node.id);
        let targets = &config.delivery.targets;
        if targets.allow_private {
            tracing::warn!("--allow-private-targets: endpoints may reach loopback, private and metadata addresses; for local testing only");
        } else if !targets.allowed.is_empty() {
            let subnets: Vec<String> = targets.allowed.iter().map(|n| n.to_string()).collect();
            tracing::warn!(subnets = %subnets.join(","), "--allow-subnets: endpoints may reach these internal addresses");
        }
        if let Some(proxy) = &config.delivery.egress_proxy {
            // The host only: a proxy URL may carry a password.
            let at = format!(
                "{}:{}",
                proxy.host_str().unwrap_or(""),
                proxy.port_or_known_default().unwrap_or(0)
            );
            tracing::info!(proxy = %at, "--egress-proxy: every webhook goes through this proxy, which must enforce egress rules itself");
        }
        let sessions = store.sessions().await?;
        session::spawn_cleaner(&sessions);
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| BuildError::Bind(config.listen, e))?;
        let site = Arc::new(SiteFiles::new(config.site_root.clone()));
        let missing = site.missing();
        if config.serve_api && !missing.is_empty() {
            tracing::warn!(
                files = %site.describe(),
                missing = %missing.join(", "),
                "the dashboard's stylesheet and scripts are missing: pages work, unstyled and without scripts; build with `make build`, or pass --site-root"
            );
        }
        let leptos_options = LeptosOptions::builder()
            .output_name("dakghar")
            .site_pkg_dir(site.pkg_dir())
            .site_addr(
                listener
                    .local_addr()
                    .map_err(|e| BuildError::Bind(config.listen, e))?,
            )
            .build();
        let secure = config.secure_cookies;
        let run_workers = config.run_workers;
        let mut config = config;
        if config.brand.logo.is_none() {
            config.brand.logo = site.logo();
        }
        // Links in emails and portal URLs name the address actually bound
        // when nothing else is configured.
        if config.public_url.is_none() {
            let addr = listener
                .local_addr()
                .map_err(|e| BuildError::Bind(config.listen, e))?;
            config.public_url = Some(format!("http://{addr}"));
        }
        let ingest_rate_limit = config.ingest_rate_limit;
        let telemetry = Arc::new(match &config.otlp_endpoint {
            Some(endpoint) => {
                let on = Telemetry::exporting_to(endpoint).map_err(BuildError::Telemetry)?;
                tracing::info!(collector = %crate::telemetry::masked(endpoint), "exporting trace spans over OTLP/HTTP");
                on
            }
            None => Telemetry::default(),
        });
        let engine = Engine::new(
            store.clone(),
            clock.clone(),
            config.delivery.clone(),
            Arc::clone(&telemetry),
        )
        .map_err(|e| BuildError::Http(e.to_string()))?;
        let mailer = config
            .mail
            .as_ref()
            .map(crate::jobs::mailer::Mailer::new)
            .transpose()
            .map_err(BuildError::Mail)?;
        let state = AppState {
            leptos_options: Arc::new(leptos_options),
            ctx: Arc::new(Ctx {
                ingester: crate::store::Ingester::start(
                    store.clone(),
                    Some(Arc::clone(&engine) as Arc<dyn crate::store::Workers>),
                ),
                store,
                clock,
                config,
                engine: Arc::clone(&engine),
                mail: Arc::new(tokio::sync::Notify::new()),
                key_uses: Default::default(),
                keys: Default::default(),
                hashing: Default::default(),
                gauges: Default::default(),
                ingest_rate: crate::auth::ingest_rate::IngestRate::new(ingest_rate_limit),
                telemetry,
            }),
        };
        let ctx = Arc::clone(&state.ctx);
        let metrics_listener = match ctx.config.metrics_listen {
            Some(at) => Some(
                TcpListener::bind(at)
                    .await
                    .map_err(|e| BuildError::Bind(at, e))?,
            ),
            None => None,
        };
        let metrics = Router::new()
            .route("/metrics", get(metrics_text))
            .with_state(state.clone());
        let metrics_beside = metrics_listener.is_none().then(|| metrics.clone());
        let router = if ctx.config.serve_api {
            router(state, site).layer(session::layer(&sessions, secure, ctx.config.sessions.idle))
        } else {
            Router::new()
                .route("/healthz", get(|| async { "ok" }))
                .route("/readyz", get(readyz))
                .with_state(state)
        };
        let router = match metrics_beside {
            Some(metrics) => router.merge(metrics),
            None => router,
        };
        let metrics = metrics_listener.map(|l| (l, metrics));
        Ok(Application {
            listener,
            node,
            metrics,
            router,
            engine,
            run_workers,
            ctx,
            mailer,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    pub fn port(&self) -> u16 {
        self.local_addr().port()
    }

    /// Where `/metrics` is served when it has a listener of its own.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|(l, _)| l.local_addr().ok())
    }

    /// What the application's actions share, for work started beside it.
    pub fn context(&self) -> Arc<Ctx> {
        Arc::clone(&self.ctx)
    }

    pub fn engine(&self) -> Arc<Engine> {
        Arc::clone(&self.engine)
    }

    /// Serves until `shutdown`; then the workers stop claiming and in-flight
    /// attempts get the grace period to finish.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        let stop = tokio_util::sync::CancellationToken::new();
        let workers = self.run_workers.then(|| self.engine.spawn(stop.clone()));
        let heartbeat = crate::jobs::heartbeat::spawn(
            self.ctx.store.clone(),
            self.ctx.clock.clone(),
            self.node.clone(),
            stop.clone(),
        );
        // Maintenance runs where the workers do: on worker nodes.
        let ctx = &self.ctx;
        let jobs = if self.run_workers {
            let every_mail = ctx.config.mail.as_ref().map(|m| m.every);
            let jobs = Jobs {
                retention: ctx.config.retention.clone(),
                mail: self
                    .mailer
                    .zip(every_mail)
                    .map(|(mailer, every)| (mailer, every, Arc::clone(&ctx.mail))),
                alerts_every: Duration::from_secs(60),
                public_url: ctx.public_url(""),
                vacuum: VacuumPolicy::default(),
            };
            jobs::spawn(&ctx.store, &ctx.clock, jobs, &stop)
        } else {
            Vec::new()
        };
        let stop_on_signal = stop.clone();
        // Without TCP_NODELAY a response written in two pieces waits out the
        // client's delayed ACK: about 40 ms on every small API answer.
        let listener = self.listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "could not set TCP_NODELAY");
            }
        });
        let scraped = self.metrics.map(|(listener, metrics)| {
            let stop = stop.clone();
            tokio::spawn(async move {
                axum::serve(listener, metrics.into_make_service())
                    .with_graceful_shutdown(async move { stop.cancelled().await })
                    .await
            })
        });
        // Served as a make-service, each connection gets the router by an
        // Arc clone. Served as a bare Router, axum 0.8 re-applies its state
        // per connection: a deep copy of every route (leptos's options
        // among them) on the accept loop's one thread. Under a burst of new
        // connections that copy ate the server's CPU, the backlog grew,
        // and the waiting clients opened more connections (issue 16).
        let served = axum::serve(listener, self.router.into_make_service())
            .with_graceful_shutdown(async move {
                shutdown.await;
                stop_on_signal.cancel();
            })
            .await;
        stop.cancel();
        if let Some(scraped) = scraped {
            let _ = scraped.await;
        }
        if let Some(workers) = workers {
            let _ = workers.await;
        }
        for job in jobs {
            let _ = job.await;
        }
        let _ = heartbeat.await;
        // The last spans, sent while the runtime that carries them still runs.
        let telemetry = Arc::clone(&self.ctx.telemetry);
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
        served
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, io::Error),
    #[error("cannot set up the HTTP client: {0}")]
    Http(String),
    #[error("{0}")]
    Mail(String),
    #[error("--otlp-endpoint: {0}")]
    Telemetry(String),
}

/// For load balancers: 200 once this node can serve (the database answers
/// within two seconds and has every migration this binary knows), else
/// 503 with why. `/healthz` stays a liveness answer.
async fn readyz(State(state): State<AppState>) -> axum::response::Response {
    use axum::{http::StatusCode, response::IntoResponse};
    let ready = tokio::time::timeout(Duration::from_secs(2), state.ctx.store.readiness()).await;
    match ready {
        Ok(Ok(())) => (StatusCode::OK, "ready").into_response(),
        Ok(Err(why)) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the database did not answer within 2 s",
        )
            .into_response(),
    }
}

/// Prometheus text format; open like `/healthz`, as scrapers expect.
async fn metrics_text(State(state): State<AppState>) -> impl axum::response::IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::metrics::render(&state.ctx.store, &state.ctx.gauges, state.ctx.clock.now()).await,
    )
}

fn router(state: AppState, site: Arc<SiteFiles>) -> Router {
    let embed = Arc::new(state.ctx.config.embed_origins.clone());
    dashboard::routes(&state, site, api::openapi::operations())
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .merge(api::router())
        .layer(axum::middleware::from_fn(guard::require_session_for_pages))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::load_viewer,
        ))
        .layer(axum::middleware::from_fn(protect::refuse_cross_site))
        .layer(axum::middleware::from_fn_with_state(
            embed,
            protect::security_headers,
        ))
        .with_state(state)
}

/// What `serve` and `demo` end with: nothing, or one line for stderr.
pub type RunResult = Result<(), Box<dyn std::error::Error>>;

/// Attaches the secrets key, checks it against what is stored and seals
/// secrets left in plaintext by an older version.
pub async fn with_secrets_key(
    store: Store,
    secrets_key: Option<&str>,
    secrets_key_file: Option<PathBuf>,
    database_url: Option<&str>,
) -> Result<Store, Box<dyn std::error::Error>> {
    let key = match secrets_key {
        Some(text) => SecretsKey::from_base64(text).map_err(|e| format!("--secrets-key: {e}"))?,
        None => {
            let file = secrets_key_file.unwrap_or_else(|| default_key_file(database_url));
            let (key, created) = sealing::load_or_create(&file)?;
            if created {
                tracing::warn!(file = %file.display(), "created a new secrets key; back it up, and give every node the same key");
            }
            key
        }
    };
    let store = store.with_secrets_key(key);
    let sealed = store.seal_stored_secrets().await?;
    if sealed > 0 {
        tracing::info!(
            endpoints = sealed,
            "sealed endpoint secrets that were stored in plaintext"
        );
    }
    Ok(store)
}

/// The secrets key file when none is named: beside the SQLite file (one
/// folder holds the installation), else in data/.
pub fn default_key_file(database_url: Option<&str>) -> PathBuf {
    let url = crate::store::database_url(database_url);
    let sqlite_dir = url
        .strip_prefix("sqlite://")
        .map(|p| p.split('?').next().unwrap_or(p))
        .and_then(|p| std::path::Path::new(p).parent());
    match sqlite_dir {
        Some(dir) => dir.join("secrets.key"),
        None => PathBuf::from("data/secrets.key"),
    }
}

pub async fn demo(mut config: ServeConfig, store: Store, clock: SharedClock) -> RunResult {
    let stop = tokio_util::sync::CancellationToken::new();
    let receiver = demo::start_receiver(stop.clone()).await?;
    let login = demo::seed(&store, &clock, &receiver).await?;
    // The demo's receiver lives on this machine: let the guard through to it alone.
    if let Some(ip) = url::Url::parse(&receiver)
        .ok()
        .and_then(|u| u.host_str()?.parse::<std::net::IpAddr>().ok())
    {
        config.delivery.targets.allowed.push(ipnet::IpNet::from(ip));
    }
    // Seconds, not minutes, between retries: the dashboard moves while you watch.
    config.delivery.backoff.base = Duration::from_secs(10);
    config.delivery.backoff.cap = Duration::from_secs(120);
    let app = Application::build(config, store, clock).await?;
    let addr = app.local_addr();
    let trickle = demo::trickle(
        app.context(),
        login.account_id,
        Duration::from_millis(1500),
        stop.clone(),
    );
    println!("Demo: events flow to three endpoints on a built-in receiver (healthy, flaky, gone).");
    println!("  email:    {}", login.email);
    println!("  password: {}", login.password);
    println!("  sign in:  http://{addr}/login");
    tracing::info!(%addr, "Dakghar (demo) is serving http://{addr}");
    app.run_until(shutdown_signal()).await?;
    stop.cancel();
    let _ = trickle.await;
    tracing::info!("stopped");
    Ok(())
}

pub async fn serve(config: ServeConfig, store: Store, clock: SharedClock) -> RunResult {
    if let Some(first) = accounts::first_admin(&store, clock.as_ref()).await? {
        println!("First start: created an admin user. This password is shown only once.");
        println!("  email:    {}", first.email);
        println!("  password: {}", first.password);
        println!("  sign in:  http://{}/login", config.listen);
    }
    let app = Application::build(config, store, clock).await?;
    tracing::info!(addr = %app.local_addr(), "Dakghar is serving http://{}", app.local_addr());
    app.run_until(shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
}
