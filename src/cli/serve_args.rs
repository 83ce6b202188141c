//! The flags of `serve` and `demo`, read into the server's configuration.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use app::model::Brand;
use clap::Args;

use crate::{
    config::{self, ServeConfig, SessionSettings},
    delivery::{
        backoff::{Backoff, Jitter, Strategy},
        retry_statuses::{self, RetryStatuses},
        settings::DeliverySettings,
        target_policy::TargetPolicy,
    },
    jobs::{mailer::MailSettings, retention::RetentionSettings},
    startup,
    store::Store,
};

#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "DAKGHAR_LISTEN", default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// Serve /metrics on this address instead of --listen, for a port only
    /// the scraper reaches (`127.0.0.1:9100`).
    #[arg(long, env = "DAKGHAR_METRICS_LISTEN")]
    metrics_listen: Option<SocketAddr>,
    /// Export trace spans (ingest, claim, each attempt; one trace per
    /// event) to this OTLP/HTTP collector, e.g. `http://127.0.0.1:4318`.
    #[arg(long, env = "DAKGHAR_OTLP_ENDPOINT", value_parser = parse_otlp_endpoint)]
    otlp_endpoint: Option<url::Url>,
    /// Serve the dashboard's stylesheet, JS, wasm and public files from this
    /// folder (`target/site`, where `make site` builds it) instead of the copy
    /// inside the binary: for working on the dashboard.
    #[arg(long, env = "DAKGHAR_SITE_ROOT")]
    site_root: Option<PathBuf>,
    /// Mark the session cookie Secure: set when users reach Dakghar over https.
    #[arg(long, env = "DAKGHAR_SECURE_COOKIES")]
    secure_cookies: bool,
    /// What this node does: `all`, `api` (dashboard and API, no workers) or
    /// `worker` (delivery, alerts and retention; only /healthz and /metrics).
    #[arg(long, env = "DAKGHAR_ROLE", value_enum, default_value = "all")]
    role: NodeRole,
    /// Resends allowed per endpoint per minute (API and dashboard together).
    #[arg(long, env = "DAKGHAR_RESENDS_PER_MINUTE", default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
    resends_per_minute: i64,
    /// Endpoints one account may have; an event fans out to at most this many.
    #[arg(long, env = "DAKGHAR_MAX_ENDPOINTS_PER_ACCOUNT", default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=100_000))]
    max_endpoints_per_account: i64,
    /// Events per second one account may send to this node, or `unlimited`;
    /// over it the API answers 429 with Retry-After.
    #[arg(long, env = "DAKGHAR_INGEST_RATE_LIMIT", default_value = "1000", value_parser = parse_ingest_rate)]
    ingest_rate_limit: Limit,
    /// Delete finished deliveries, their attempts and left-over events older
    /// than this (`90d`), or `off` to keep everything.
    #[arg(long, env = "DAKGHAR_RETENTION", default_value = "90d", value_parser = parse_retention)]
    retention: Retention,
    /// Write what retention deletes to JSON Lines files here first.
    #[arg(long, env = "DAKGHAR_ARCHIVE_DIR")]
    archive_dir: Option<PathBuf>,
    /// Send alert emails through this SMTP server (`smtp://host:25`,
    /// `smtps://user:password@host:465`); without it they stay in the outbox.
    #[arg(long, env = "DAKGHAR_SMTP_URL", hide_env_values = true)]
    smtp_url: Option<String>,
    /// The From address of alert emails.
    #[arg(
        long,
        env = "DAKGHAR_SMTP_FROM",
        default_value = "Dakghar <dakghar@localhost>"
    )]
    smtp_from: String,
    /// Send a copy (Bcc) of every alert to this address, for the
    /// platform's support team.
    #[arg(long, env = "DAKGHAR_SUPPORT_EMAIL")]
    support_email: Option<String>,
    /// Announce a bulk replay of more deliveries than this before its
    /// first redelivery (chapter 003: notify before replaying).
    #[arg(long, env = "DAKGHAR_REPLAY_NOTICE_THRESHOLD", default_value_t = 1000, value_parser = clap::value_parser!(i64).range(0..))]
    replay_notice_threshold: i64,
    /// How long before such a replay's first redelivery the accounts are told.
    #[arg(long, env = "DAKGHAR_REPLAY_NOTICE", default_value = "10m", value_parser = humantime::parse_duration)]
    replay_notice: Duration,
    /// The key that seals endpoint signing secrets in the database: 32 bytes
    /// in base64 (`openssl rand -base64 32`). Every node needs the same one.
    #[arg(long, env = "DAKGHAR_SECRETS_KEY", hide_env_values = true)]
    secrets_key: Option<String>,
    /// Without --secrets-key: read the key from this file, creating it (mode
    /// 0600, a fresh key) on first start. Keep a copy: sealed secrets are
    /// lost without it. Default: secrets.key beside the SQLite file, or
    /// data/secrets.key on Postgres.
    #[arg(long, env = "DAKGHAR_SECRETS_KEY_FILE")]
    secrets_key_file: Option<PathBuf>,
    /// Sign dashboard users out after this long without a request.
    #[arg(long, env = "DAKGHAR_SESSION_IDLE_TIMEOUT", default_value = "12h", value_parser = humantime::parse_duration)]
    session_idle_timeout: Duration,
    /// Sign dashboard users out this long after they signed in.
    #[arg(long, env = "DAKGHAR_SESSION_MAX_AGE", default_value = "7d", value_parser = humantime::parse_duration)]
    session_max_age: Duration,
    /// Where users reach this installation (`https://hooks.example.com`),
    /// for the links in emails and portal URLs. Default: http:// and the
    /// address it listens on.
    #[arg(long, env = "DAKGHAR_PUBLIC_URL", value_parser = config::parse_public_url)]
    public_url: Option<String>,
    /// Origins that may show portal sessions in a frame, comma-separated
    /// (`https://app.example.com`). Portal cookies then work inside
    /// another site's iframe.
    #[arg(long, env = "DAKGHAR_EMBED_ORIGINS", value_delimiter = ',', value_parser = config::parse_origin)]
    embed_origins: Vec<String>,
    /// The product's name on every page and in every email.
    #[arg(long, env = "DAKGHAR_BRAND_NAME", default_value = "Dakghar", value_parser = config::parse_brand_name)]
    brand_name: String,
    /// The accent colour of every page: a CSS colour (`#0a7cff`, `teal`,
    /// `rgb(10 124 255)`).
    #[arg(long, env = "DAKGHAR_BRAND_ACCENT", value_parser = config::parse_colour)]
    brand_accent: Option<String>,
    #[command(flatten)]
    delivery: DeliveryArgs,
}

/// Delivery settings (SPEC §9); durations in humantime form (`90s`, `1h`).
#[derive(Debug, Args)]
struct DeliveryArgs {
    /// Backoff after the first failure; it grows per attempt as
    /// `--retry-strategy` says.
    #[arg(long, env = "DAKGHAR_RETRY_BASE_DELAY", default_value = "1m", value_parser = humantime::parse_duration)]
    retry_base_delay: Duration,
    /// How the wait grows: exponential (base × 2^(n-1)), linear (base × n)
    /// or fixed (base), capped by --retry-max-delay. Endpoints may override it.
    #[arg(
        long,
        env = "DAKGHAR_RETRY_STRATEGY",
        value_enum,
        default_value = "exponential"
    )]
    retry_strategy: Strategy,
    /// The statuses that are retried: codes, ranges and classes
    /// (`408,429,5xx`); any other non-2xx fails at once. Answers without a
    /// status (timeouts) are always retried. Endpoints may override it.
    #[arg(long, env = "DAKGHAR_RETRY_STATUSES", default_value = retry_statuses::DEFAULT)]
    retry_statuses: RetryStatuses,
    /// The longest wait between two attempts.
    #[arg(long, env = "DAKGHAR_RETRY_MAX_DELAY", default_value = "1h", value_parser = humantime::parse_duration)]
    retry_max_delay: Duration,
    /// How long after ingest a delivery is still attempted.
    #[arg(long, env = "DAKGHAR_RETRY_WINDOW", default_value = "72h", value_parser = humantime::parse_duration)]
    retry_window: Duration,
    /// Attempts before a delivery expires.
    #[arg(long, env = "DAKGHAR_MAX_ATTEMPTS", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_attempts: u32,
    #[arg(long, env = "DAKGHAR_JITTER", value_enum, default_value = "equal")]
    jitter: Jitter,
    #[arg(long, env = "DAKGHAR_REQUEST_TIMEOUT", default_value = "15s", value_parser = humantime::parse_duration)]
    request_timeout: Duration,
    #[arg(long, env = "DAKGHAR_CONNECT_TIMEOUT", default_value = "5s", value_parser = humantime::parse_duration)]
    connect_timeout: Duration,
    /// How long a worker holds a claimed delivery before the rescuer may take it back.
    #[arg(long, env = "DAKGHAR_LEASE", default_value = "5m", value_parser = humantime::parse_duration)]
    lease: Duration,
    /// Let endpoints reach loopback, private, link-local and metadata
    /// addresses. For local testing only.
    #[arg(long, env = "DAKGHAR_ALLOW_PRIVATE_TARGETS")]
    allow_private_targets: bool,
    /// Internal networks endpoints may reach anyway, comma-separated CIDRs
    /// (`127.0.0.1/32,10.20.0.0/16`).
    #[arg(long, env = "DAKGHAR_ALLOW_SUBNETS", value_delimiter = ',', value_parser = parse_subnet)]
    allow_subnets: Vec<ipnet::IpNet>,
    /// Send every webhook through this HTTP proxy (`http://proxy:3128`).
    /// The proxy must enforce egress rules itself (smokescreen, for
    /// example): Dakghar still refuses internal targets before sending, but
    /// the proxy resolves names again. HTTP_PROXY and friends are ignored.
    #[arg(long, env = "DAKGHAR_EGRESS_PROXY", value_parser = parse_proxy)]
    egress_proxy: Option<url::Url>,
    /// Concurrent claim loops in this process.
    #[arg(long, env = "DAKGHAR_WORKERS", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    workers: u16,
    /// Starts per second for endpoints without a limit of their own, or
    /// `unlimited`. An endpoint may set its own or `unlimited`.
    #[arg(long, env = "DAKGHAR_DEFAULT_RATE_LIMIT", default_value = "50", value_parser = parse_rate_limit)]
    default_rate_limit: Limit,
    /// Attempts in flight to one receiver (host and port) across all
    /// endpoints and accounts, on every node, or `unlimited`.
    #[arg(long, env = "DAKGHAR_MAX_IN_FLIGHT_PER_HOST", default_value = "10", value_parser = parse_host_cap)]
    max_in_flight_per_host: Limit,
}

/// A number, or `unlimited` (`None`).
#[derive(Debug, Clone, Copy)]
struct Limit(Option<i64>);

fn parse_limit(raw: &str, most: i64) -> Result<Limit, String> {
    let raw = raw.trim();
    if raw.eq_ignore_ascii_case("unlimited") {
        return Ok(Limit(None));
    }
    match raw.parse::<i64>() {
        Ok(n) if (1..=most).contains(&n) => Ok(Limit(Some(n))),
        _ => Err(format!(
            "{raw:?}: a whole number from 1 to {most}, or unlimited"
        )),
    }
}

fn parse_rate_limit(raw: &str) -> Result<Limit, String> {
    parse_limit(raw, crate::endpoints::MAX_RATE_LIMIT)
}

fn parse_ingest_rate(raw: &str) -> Result<Limit, String> {
    parse_limit(raw, 1_000_000)
}

fn parse_host_cap(raw: &str) -> Result<Limit, String> {
    parse_limit(raw, 100_000)
}

impl DeliveryArgs {
    fn settings(&self) -> DeliverySettings {
        DeliverySettings {
            backoff: Backoff {
                base: self.retry_base_delay,
                cap: self.retry_max_delay.max(self.retry_base_delay),
                jitter: self.jitter,
                strategy: self.retry_strategy,
            },
            retry_statuses: self.retry_statuses.clone(),
            retry_window: self.retry_window,
            max_attempts: self.max_attempts,
            request_timeout: self.request_timeout,
            connect_timeout: self.connect_timeout,
            // A lease shorter than a request would let the rescuer steal live work.
            lease: self
                .lease
                .max(self.request_timeout + Duration::from_secs(5)),
            workers: usize::from(self.workers),
            targets: TargetPolicy {
                allow_private: self.allow_private_targets,
                allowed: self.allow_subnets.clone(),
            },
            egress_proxy: self.egress_proxy.clone(),
            default_rate_limit: self.default_rate_limit.0,
            max_in_flight_per_host: self.max_in_flight_per_host.0,
            ..DeliverySettings::default()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum NodeRole {
    All,
    Api,
    Worker,
}

/// A retention period, or none.
#[derive(Debug, Clone, Copy)]
struct Retention(Option<Duration>);

fn parse_retention(raw: &str) -> Result<Retention, String> {
    if raw.eq_ignore_ascii_case("off") {
        return Ok(Retention(None));
    }
    let keep = humantime::parse_duration(raw)
        .map_err(|e| format!("{e}; use a duration such as 90d, or off"))?;
    if keep < Duration::from_secs(3600) {
        return Err("retention must be at least 1h (or off)".into());
    }
    Ok(Retention(Some(keep)))
}

fn parse_proxy(raw: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(raw.trim())
        .map_err(|e| format!("not a proxy URL like http://proxy:3128: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err("the egress proxy must be an http:// or https:// URL with a host".into());
    }
    Ok(url)
}

fn parse_subnet(raw: &str) -> Result<ipnet::IpNet, String> {
    let raw = raw.trim();
    raw.parse::<ipnet::IpNet>()
        .or_else(|_| raw.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{raw:?} is not a subnet like 127.0.0.1/32 or fd00::/8"))
}

pub(super) async fn secrets_key(
    store: Store,
    args: &ServeArgs,
    database_url: Option<&str>,
) -> Result<Store, Box<dyn std::error::Error>> {
    startup::with_secrets_key(
        store,
        args.secrets_key.as_deref(),
        args.secrets_key_file.clone(),
        database_url,
    )
    .await
}

pub(super) fn serve_config(args: ServeArgs) -> ServeConfig {
    ServeConfig {
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        otlp_endpoint: args.otlp_endpoint,
        secure_cookies: args.secure_cookies,
        delivery: args.delivery.settings(),
        run_workers: args.role != NodeRole::Api,
        serve_api: args.role != NodeRole::Worker,
        resends_per_minute: args.resends_per_minute,
        max_endpoints_per_account: args.max_endpoints_per_account,
        ingest_rate_limit: args
            .ingest_rate_limit
            .0
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        retention: RetentionSettings {
            keep: args.retention.0,
            archive_dir: args.archive_dir,
            ..RetentionSettings::default()
        },
        mail: args.smtp_url.map(|smtp_url| MailSettings {
            smtp_url,
            from: args.smtp_from,
            every: Duration::from_secs(10),
            support: args.support_email,
        }),
        sessions: SessionSettings {
            idle: args.session_idle_timeout,
            max_age: args.session_max_age,
        },
        public_url: args.public_url,
        replay_notice_threshold: args.replay_notice_threshold,
        replay_notice: args.replay_notice,
        embed_origins: args.embed_origins,
        brand: Brand {
            name: args.brand_name,
            accent: args.brand_accent,
            logo: None,
        },
        site_root: args.site_root,
    }
}

/// `dakghar config check`: what `serve` with these settings would do,
/// checked without starting it. Returns the effective configuration, with
/// secrets masked, and the problems found (none: it would start).
pub(super) async fn check(
    args: ServeArgs,
    database_url: Option<&str>,
    store: Result<Store, String>,
) -> (String, Vec<String>) {
    let dur = |d: Duration| humantime::format_duration(d).to_string();
    let mut problems = Vec::new();
    let mut out = String::new();
    let mut line = |k: &str, v: String| out.push_str(&format!("{k:<28} {v}\n"));
    let url = crate::store::database_url(database_url);
    line("database", crate::store::redact_url(&url));
    let mut migrated = false;
    if let Ok(store) = &store {
        line(
            "database pool",
            format!("{} connections", store.pool_size()),
        );
    }
    match &store {
        Ok(store) => match store.readiness().await {
            Ok(()) => {
                migrated = true;
                line(
                    "database state",
                    "reachable, every migration applied".into(),
                )
            }
            Err(why) => {
                line("database state", why.clone());
                // Pending migrations are applied by `serve` itself.
                if !why.starts_with("migrations pending") {
                    problems.push(format!("database: {why}"));
                }
            }
        },
        Err(e) => {
            line("database state", "unreachable".into());
            problems.push(format!("database: {e}"));
        }
    }
    // The secrets key: read (never created here), and tried on what is stored.
    let key = match (&args.secrets_key, &args.secrets_key_file) {
        (Some(text), _) => {
            line("secrets key", "from --secrets-key (****)".into());
            crate::sealing::SecretsKey::from_base64(text)
                .map(Some)
                .map_err(|e| format!("--secrets-key: {e}"))
        }
        (None, file) => {
            let file = file
                .clone()
                .unwrap_or_else(|| startup::default_key_file(database_url));
            if file.exists() {
                line("secrets key", format!("file {} (****)", file.display()));
                std::fs::read_to_string(&file)
                    .map_err(|e| format!("secrets key file {}: {e}", file.display()))
                    .and_then(|text| {
                        crate::sealing::SecretsKey::from_base64(text.trim())
                            .map(Some)
                            .map_err(|e| format!("secrets key file {}: {e}", file.display()))
                    })
            } else {
                line(
                    "secrets key",
                    format!("file {} (created at the first start)", file.display()),
                );
                Ok(None)
            }
        }
    };
    // What is stored can be tried once the tables are as this binary knows them.
    match (key, &store) {
        (Err(e), _) => problems.push(e),
        (Ok(Some(key)), Ok(store)) if migrated => match store
            .clone()
            .with_secrets_key(key)
            .secrets_that_do_not_open()
            .await
        {
            Ok(broken) if broken.is_empty() => {}
            Ok(broken) => problems.push(format!(
                "the secrets key does not open the signing secret of {} endpoint(s), e.g. {}",
                broken.len(),
                broken[0]
            )),
            Err(e) => problems.push(format!("database: {e}")),
        },
        _ => {}
    }
    if let Some(smtp) = &args.smtp_url {
        let settings = MailSettings {
            smtp_url: smtp.clone(),
            from: args.smtp_from.clone(),
            every: Duration::from_secs(10),
            support: args.support_email.clone(),
        };
        if let Err(e) = crate::jobs::mailer::Mailer::new(&settings) {
            problems.push(format!("--smtp-url / --smtp-from: {e}"));
        }
    }
    let site = crate::dashboard::site_files::SiteFiles::new(args.site_root.clone());
    let missing = site.missing();
    if args.role != NodeRole::Worker && !missing.is_empty() {
        problems.push(format!(
            "the dashboard's files ({}): {} missing",
            site.describe(),
            missing.join(", ")
        ));
    }
    let config = serve_config(args);
    line("listen", config.listen.to_string());
    line(
        "metrics",
        config
            .metrics_listen
            .map_or_else(|| "beside the API".into(), |a| a.to_string()),
    );
    line("role", config.role().into());
    line("dashboard files", site.describe());
    line(
        "traces",
        config
            .otlp_endpoint
            .as_ref()
            .map_or_else(|| "off".into(), crate::telemetry::masked),
    );
    line(
        "public url",
        config
            .public_url
            .clone()
            .unwrap_or_else(|| "http:// and the listen address".into()),
    );
    line("secure cookies", config.secure_cookies.to_string());
    let d = &config.delivery;
    line(
        "retries",
        format!(
            "{} from {} up to {}, at most {} attempts within {}",
            d.backoff.strategy.as_str(),
            dur(d.backoff.base),
            dur(d.backoff.cap),
            d.max_attempts,
            dur(d.retry_window)
        ),
    );
    line("retried statuses", d.retry_statuses.to_string());
    line(
        "timeouts",
        format!(
            "connect {}, request {}, lease {}",
            dur(d.connect_timeout),
            dur(d.request_timeout),
            dur(d.lease)
        ),
    );
    line(
        "workers",
        format!("{} loops of {}", d.workers, d.batch_size),
    );
    let limit = |l: Option<i64>| l.map_or_else(|| "unlimited".to_string(), |n| n.to_string());
    line("default rate limit", limit(d.default_rate_limit));
    line("in flight per host", limit(d.max_in_flight_per_host));
    line(
        "ingest rate per account",
        limit(config.ingest_rate_limit.map(i64::from)),
    );
    line(
        "endpoints per account",
        config.max_endpoints_per_account.to_string(),
    );
    line("resends per minute", config.resends_per_minute.to_string());
    let targets = &d.targets;
    line(
        "private targets",
        if targets.allow_private {
            "all allowed (--allow-private-targets)".into()
        } else if targets.allowed.is_empty() {
            "refused".into()
        } else {
            let nets: Vec<String> = targets.allowed.iter().map(|n| n.to_string()).collect();
            format!("refused but {}", nets.join(", "))
        },
    );
    line(
        "egress proxy",
        d.egress_proxy
            .as_ref()
            .map_or_else(|| "none".into(), |u| crate::store::redact_url(u.as_str())),
    );
    line(
        "retention",
        config.retention.keep.map_or_else(|| "off".into(), dur),
    );
    line(
        "alert email",
        config.mail.as_ref().map_or_else(
            || "off (outbox only)".into(),
            |m| crate::store::redact_url(&m.smtp_url),
        ),
    );
    line(
        "sessions",
        format!(
            "idle {}, at most {}",
            dur(config.sessions.idle),
            dur(config.sessions.max_age)
        ),
    );
    (out, problems)
}

/// `--otlp-endpoint`: an http(s) URL; its user part, if any, stays out of logs.
fn parse_otlp_endpoint(raw: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(raw).map_err(|e| format!("{raw:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "{raw:?}: the collector's OTLP/HTTP address, such as http://127.0.0.1:4318"
        ));
    }
    Ok(url)
}
