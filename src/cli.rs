//! The command line (SPEC §9). Every flag can also come from `DAKGHAR_<FLAG>`.
//! Failures print one line and exit non-zero; they never panic.

use std::{
    io::{BufRead, IsTerminal},
    process::ExitCode,
    sync::Arc,
};

use clap::{Parser, Subcommand};

use crate::{
    accounts,
    clock::{SharedClock, SystemClock},
    error::Error,
    startup,
    store::{Account, Role, Store, User},
};

mod operator;
mod serve_args;

use serve_args::{secrets_key, serve_config, ServeArgs};

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
    /// What the installation is doing now: the queue, dead letters of the
    /// last day, circuits, paused endpoints, and each node with what it holds.
    Status {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// An account's events.
    #[command(subcommand)]
    Events(EventsCmd),
    /// The configuration.
    #[command(subcommand)]
    Config(ConfigCmd),
}

#[derive(Debug, Subcommand)]
enum EventsCmd {
    /// Writes the account's events, their deliveries and attempts to
    /// standard output as JSON Lines, in the retention archive's format
    /// (payloads and bodies in base64), oldest first.
    Export {
        /// The account's name.
        #[arg(long)]
        account: String,
        /// Events created at or after this RFC 3339 time.
        #[arg(long, value_parser = parse_time)]
        since: Option<crate::clock::Timestamp>,
        /// Events created before this RFC 3339 time.
        #[arg(long, value_parser = parse_time)]
        until: Option<crate::clock::Timestamp>,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCmd {
    /// Checks every setting `serve` would take (the same flags and
    /// variables) and the database, prints the effective configuration with
    /// secrets masked, and exits non-zero if anything would stop it.
    Check(Box<ServeArgs>),
}

fn parse_time(raw: &str) -> Result<crate::clock::Timestamp, String> {
    chrono::DateTime::parse_from_rfc3339(raw)
        .map(|t| crate::clock::Timestamp(t.timestamp_millis()))
        .map_err(|_| format!("{raw:?} is not an RFC 3339 time such as 2026-01-31T12:00:00Z"))
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
    /// Set a user's password (read from standard input unless given) and
    /// end every session they have.
    ResetPassword {
        #[arg(long, env = "DAKGHAR_EMAIL")]
        email: String,
        #[arg(long, env = "DAKGHAR_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// Delete a user; their sessions open nothing from then on.
    Delete {
        #[arg(long, env = "DAKGHAR_EMAIL")]
        email: String,
    },
}

#[derive(Debug, Subcommand)]
enum ApiKeyCmd {
    /// Create an API key for an account, or a platform key; prints only the key.
    Create {
        #[arg(long, env = "DAKGHAR_ACCOUNT", required_unless_present = "platform")]
        account: Option<String>,
        /// An admin key may call the admin API.
        #[arg(long, env = "DAKGHAR_ADMIN")]
        admin: bool,
        /// A platform key acts on any account, at /api/v1/accounts/….
        #[arg(long, env = "DAKGHAR_PLATFORM", conflicts_with_all = ["account", "admin"])]
        platform: bool,
        /// What the key is for, shown beside it in the dashboard.
        #[arg(long, default_value = "")]
        name: String,
    },
}

type CliResult = Result<(), Box<dyn std::error::Error>>;

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let logs = init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            drop(logs);
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The log's last lines first, then the reason it stopped.
            drop(logs);
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// About 3 MiB of attempt lines. The buffer's slots are allocated up
/// front, so the crate's default (128 000) would cost an idle node 4 MiB.
const LOG_LINES_BEHIND: usize = 8_192;

/// Log lines go to stderr from a thread of their own, in batches.
/// Written by the task that logged it, every delivery attempt's line was a
/// `write` on a runtime thread, which every other task on that thread
/// waited for. In `make bench` (Postgres, x10) with the attempt lines
/// off the burn-down ran 9 038 and 9 749 deliveries/s against 7 899-8 544
/// and the first attempt's p99 at 10 % load was 8.5-8.7 ms against 24-407
/// (bench/HISTORY.md, thirty-fifth pass). Nothing is dropped: a writer that
/// falls `LOG_LINES_BEHIND` lines behind makes the callers wait, as
/// before. The returned guard writes what is left when dropped.
fn init_tracing() -> tracing_appender::non_blocking::WorkerGuard {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_sessions=warn"));
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .buffered_lines_limit(LOG_LINES_BEHIND)
        .thread_name("dakghar-log")
        .finish(std::io::BufWriter::with_capacity(
            64 * 1024,
            std::io::stderr(),
        ));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        // Colour codes only help a terminal; in a log file they are noise.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    guard
}

async fn run(cli: Cli) -> CliResult {
    let url = cli
        .database_url
        .or_else(|| std::env::var("DATABASE_URL").ok());
    // A check changes nothing, and reports an unreachable database rather
    // than stopping at it.
    if let Command::Config(ConfigCmd::Check(args)) = cli.command {
        let store = Store::connect_pooled(url.as_deref(), cli.database_pool)
            .await
            .map_err(|e| e.to_string());
        let (report, problems) = serve_args::check(*args, url.as_deref(), store).await;
        print!("{report}");
        if problems.is_empty() {
            println!("ok: serve would start with this configuration");
            return Ok(());
        }
        for p in &problems {
            eprintln!("problem: {p}");
        }
        return Err(format!("{} problem(s) found", problems.len()).into());
    }
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
        Command::User(UserCmd::ResetPassword { email, password }) => {
            let user = find_user(&store, &email).await?;
            let password = match password {
                Some(p) => p,
                None => read_password()?,
            };
            accounts::set_password(&store, &user.id, password).await?;
            println!("{}", user.id);
            Ok(())
        }
        Command::User(UserCmd::Delete { email }) => {
            let user = find_user(&store, &email).await?;
            accounts::delete_user(&store, &user.id).await?;
            println!("{}", user.id);
            Ok(())
        }
        Command::ApiKey(ApiKeyCmd::Create {
            account,
            admin,
            platform: true,
            name,
        }) => {
            debug_assert!(account.is_none() && !admin, "clap keeps them apart");
            let key = accounts::platform::create_key(&store, &name, clock.now()).await?;
            println!("{}", key.key);
            Ok(())
        }
        Command::Status { json } => {
            print!("{}", operator::status(&store, clock.now(), json).await?);
            Ok(())
        }
        Command::Events(EventsCmd::Export {
            account,
            since,
            until,
        }) => {
            let account = find_account(&store, &account).await?;
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let lines = operator::export(&store, &account.id, since, until, &mut out).await?;
            std::io::Write::flush(&mut out).map_err(|e| format!("cannot write: {e}"))?;
            eprintln!("exported {lines} line(s)");
            Ok(())
        }
        Command::Config(ConfigCmd::Check(_)) => unreachable!("handled before connecting"),
        Command::ApiKey(ApiKeyCmd::Create {
            account,
            admin,
            name,
            ..
        }) => {
            let account = find_account(&store, account.as_deref().unwrap_or_default()).await?;
            let key =
                accounts::create_api_key(&store, &account.id, &name, admin, clock.now()).await?;
            println!("{}", key.key);
            Ok(())
        }
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

/// The user `--email` names, in the command line's words.
async fn find_user(store: &Store, email: &str) -> Result<User, String> {
    let email = accounts::normalize_email(email).map_err(|e| e.to_string())?;
    match accounts::user_by_email(store, &email).await {
        Ok(u) => Ok(u),
        Err(Error::NotFound(_)) => Err(format!("no user with the email {email:?}")),
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
