//! The command line (SPEC §9). Every flag can also come from `DAKGHAR_<FLAG>`.
//! Failures print one line and exit non-zero; they never panic.

use std::{
    io::{BufRead, IsTerminal},
    net::SocketAddr,
    path::PathBuf,
    process::ExitCode,
    sync::Arc,
    time::Duration,
};

use clap::{Args, Parser, Subcommand};

use crate::{
    accounts,
    clock::{SharedClock, SystemClock},
    config::ServeConfig,
    delivery::{
        backoff::{Backoff, Jitter},
        settings::DeliverySettings,
        target_policy::TargetPolicy,
    },
    error::Error,
    jobs::{mailer::MailSettings, retention::RetentionSettings},
    startup,
    store::{Account, Role, Store},
};

#[derive(Debug, Parser)]
#[command(name = "dakghar", version, about = "Webhook delivery in one binary")]
pub struct Cli {
    /// Database URL: sqlite://PATH or postgres://…  Unset: also reads
    /// DATABASE_URL, else the SQLite file data/dakghar.db.
    #[arg(long, global = true, env = "DAKGHAR_DATABASE_URL")]
    database_url: Option<String>,

    /// Database connections this process may open. On Postgres, size the
    /// server for every node's pool plus one listener each.
    #[arg(long, global = true, env = "DAKGHAR_DATABASE_POOL", default_value_t = crate::store::DEFAULT_POOL, value_parser = clap::value_parser!(u32).range(2..=1000))]
    database_pool: u32,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the dashboard and the API.
    Serve(ServeArgs),
    /// Serve with a demo account, endpoints on a built-in flaky receiver and
    /// a trickle of events; prints the login.
    Demo(ServeArgs),
    /// Apply database migrations and exit.
    Migrate,
    /// Manage accounts (tenants).
    #[command(subcommand)]
    Account(AccountCmd),
    /// Manage dashboard users.
    #[command(subcommand)]
    User(UserCmd),
    /// Manage producer API keys.
    #[command(subcommand, name = "api-key")]
    ApiKey(ApiKeyCmd),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "DAKGHAR_LISTEN", default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// Folder holding the built stylesheet, JS and wasm (cargo-leptos's site root).
    #[arg(long, env = "DAKGHAR_SITE_ROOT", default_value = "target/site")]
    site_root: PathBuf,
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
    #[command(flatten)]
    delivery: DeliveryArgs,
}

/// Delivery settings (SPEC §9); durations in humantime form (`90s`, `1h`).
#[derive(Debug, Args)]
struct DeliveryArgs {
    /// Backoff after the first failure; doubles per attempt.
    #[arg(long, env = "DAKGHAR_RETRY_BASE_DELAY", default_value = "1m", value_parser = humantime::parse_duration)]
    retry_base_delay: Duration,
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
    /// Concurrent claim loops in this process.
    #[arg(long, env = "DAKGHAR_WORKERS", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    workers: u16,
}

impl DeliveryArgs {
    fn settings(&self) -> DeliverySettings {
        DeliverySettings {
            backoff: Backoff {
                base: self.retry_base_delay,
                cap: self.retry_max_delay.max(self.retry_base_delay),
                jitter: self.jitter,
            },
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
            ..DeliverySettings::default()
        }
    }
}

#[derive(Debug, Subcommand)]
enum AccountCmd {
    /// Create an account; prints its id.
    Create {
        #[arg(long, env = "DAKGHAR_NAME")]
        name: String,
    },
}

#[derive(Debug, Subcommand)]
enum UserCmd {
    /// Create a user; the password is read from standard input unless given.
    Create {
        #[arg(long, env = "DAKGHAR_EMAIL")]
        email: String,
        /// Name of the account the user belongs to.
        #[arg(long, env = "DAKGHAR_ACCOUNT")]
        account: String,
        /// Make the user an admin (sees all accounts, runs bulk replays).
        #[arg(long, env = "DAKGHAR_ADMIN")]
        admin: bool,
        /// For scripts; prefer standard input, which stays out of shell history.
        #[arg(long, env = "DAKGHAR_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ApiKeyCmd {
    /// Create an API key for an account; prints only the key.
    Create {
        #[arg(long, env = "DAKGHAR_ACCOUNT")]
        account: String,
        /// An admin key may call the admin API.
        #[arg(long, env = "DAKGHAR_ADMIN")]
        admin: bool,
    },
}

type CliResult = Result<(), Box<dyn std::error::Error>>;

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
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

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_sessions=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only help a terminal; in a log file they are noise.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

async fn run(cli: Cli) -> CliResult {
    let url = cli
        .database_url
        .or_else(|| std::env::var("DATABASE_URL").ok());
    let store = Store::connect_pooled(url.as_deref(), cli.database_pool).await?;
    store.migrate().await?;
    let clock: SharedClock = Arc::new(SystemClock);
    match cli.command {
        Command::Migrate => {
            println!("migrations applied");
            Ok(())
        }
        Command::Serve(args) => {
            let store = secrets_key(store, &args, url.as_deref()).await?;
            startup::serve(serve_config(args), store, clock).await
        }
        Command::Demo(args) => {
            let store = secrets_key(store, &args, url.as_deref()).await?;
            startup::demo(serve_config(args), store, clock).await
        }
        Command::Account(AccountCmd::Create { name }) => {
            let account = accounts::create_account(&store, &name, clock.now()).await?;
            println!("{}", account.id);
            Ok(())
        }
        Command::User(UserCmd::Create {
            email,
            account,
            admin,
            password,
        }) => {
            // Before asking for a password that could not be used.
            let email = accounts::normalize_email(&email)?;
            let account = find_account(&store, &account).await?;
            let password = match password {
                Some(p) => p,
                None => read_password()?,
            };
            let role = if admin { Role::Admin } else { Role::Member };
            let user =
                accounts::create_user(&store, &account.id, &email, password, role, clock.now())
                    .await?;
            println!("{}", user.id);
            Ok(())
        }
        Command::ApiKey(ApiKeyCmd::Create { account, admin }) => {
            let account = find_account(&store, &account).await?;
            let key = accounts::create_api_key(&store, &account.id, admin, clock.now()).await?;
            println!("{}", key.key);
            Ok(())
        }
    }
}

fn parse_subnet(raw: &str) -> Result<ipnet::IpNet, String> {
    let raw = raw.trim();
    raw.parse::<ipnet::IpNet>()
        .or_else(|_| raw.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{raw:?} is not a subnet like 127.0.0.1/32 or fd00::/8"))
}

async fn secrets_key(
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

fn serve_config(args: ServeArgs) -> ServeConfig {
    ServeConfig {
        listen: args.listen,
        site_root: args.site_root,
        secure_cookies: args.secure_cookies,
        delivery: args.delivery.settings(),
        run_workers: args.role != NodeRole::Api,
        serve_api: args.role != NodeRole::Worker,
        resends_per_minute: args.resends_per_minute,
        retention: RetentionSettings {
            keep: args.retention.0,
            archive_dir: args.archive_dir,
            ..RetentionSettings::default()
        },
        mail: args.smtp_url.map(|smtp_url| MailSettings {
            smtp_url,
            from: args.smtp_from,
            every: Duration::from_secs(10),
        }),
        sessions: crate::config::SessionSettings {
            idle: args.session_idle_timeout,
            max_age: args.session_max_age,
        },
    }
}

/// The account `--account NAME` names, in the command line's words.
async fn find_account(store: &Store, name: &str) -> Result<Account, String> {
    match accounts::named(store, name).await {
        Ok(a) => Ok(a),
        Err(Error::NotFound(_)) => Err(format!("no account named {name:?}")),
        Err(e) => Err(e.to_string()),
    }
}

fn read_password() -> Result<String, String> {
    if std::io::stdin().is_terminal() {
        eprint!("Password: ");
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| format!("cannot read password from standard input: {e}"))?;
    let password = line.trim_end_matches(['\r', '\n']).to_string();
    if password.is_empty() {
        return Err("no password given: pass it on standard input or with --password".into());
    }
    Ok(password)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
