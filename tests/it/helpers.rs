//! Test fixtures: a fresh database per test on either backend, a running
//! server on a free port, and seeded accounts.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use dakghar::{
    auth::password,
    clock::{Clock, TestClock, Timestamp},
    config::ServeConfig,
    ids,
    startup::Application,
    store::{
        postgres, Account, AccountRole, Delivery, DeliveryState, NewEndpoint, NewEvent, NewIngest,
        Role, Store, User,
    },
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Runs each named `async fn(Store)` once on SQLite and once on Postgres.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    let db = crate::helpers::TestDb::sqlite().await;
                    super::$name(db.store.clone()).await;
                    db.finish().await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
                async fn postgres() {
                    let db = crate::helpers::TestDb::postgres().await;
                    super::$name(db.store.clone()).await;
                    db.finish().await;
                }
            }
        )*
    };
}

/// Like `on_both_backends!` for tests that need the database itself, for
/// instance to open a second node on it: each `async fn(&TestDb)`.
macro_rules! on_both_backends_db {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    let db = crate::helpers::TestDb::sqlite().await;
                    super::$name(&db).await;
                    db.finish().await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
                async fn postgres() {
                    let db = crate::helpers::TestDb::postgres().await;
                    super::$name(&db).await;
                    db.finish().await;
                }
            }
        )*
    };
}

/// `d.state()` as the assertions were written while the state was text:
/// `Some` of it. Import it where a test compares delivery states.
pub trait StateOf {
    fn state(&self) -> Option<DeliveryState>;
}

impl StateOf for Delivery {
    fn state(&self) -> Option<DeliveryState> {
        Some(self.state)
    }
}

/// The key every test store and test binary seals endpoint secrets with.
pub const TEST_SECRETS_KEY: &str = "dGVzdCBzZWNyZXRzIGtleSwgMzIgYnl0ZXMgbG9uZyE=";

pub fn test_secrets_key() -> dakghar::sealing::SecretsKey {
    dakghar::sealing::SecretsKey::from_base64(TEST_SECRETS_KEY).expect("a valid test key")
}

/// Queues events as ingest does, in batches: one at a time, each event
/// reads its account's endpoints again, which dominates a setup of
/// thousands of events.
pub async fn queue_events(
    store: &Store,
    events: impl IntoIterator<Item = NewEvent>,
    now: Timestamp,
    give_up_at: Timestamp,
) {
    let items: Vec<NewIngest> = events
        .into_iter()
        .map(|event| NewIngest {
            event,
            only: None,
            now,
            give_up_at,
            traceparent: None,
            key_id: None,
        })
        .collect();
    for batch in items.chunks(500) {
        for inserted in store.insert_events(batch).await.unwrap() {
            inserted.unwrap();
        }
    }
}

/// An endpoint to create: `types` empty means every event type.
pub fn new_endpoint(account_id: &str, url: &str, types: &[&str]) -> NewEndpoint {
    NewEndpoint {
        account_id: account_id.to_string(),
        url: url.to_string(),
        description: String::new(),
        event_types: types.iter().map(|t| t.to_string()).collect(),
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_string(),
        rate_limit_per_sec: None,
        max_in_flight: 10,
        retry_strategy: None,
        retry_statuses: None,
    }
}

pub struct TestDb {
    pub store: Store,
    schema: Option<String>,
    url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    /// A new SQLite file in its own temporary directory.
    pub async fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("dakghar.db").display());
        let store = Store::connect(Some(&url))
            .await
            .expect("open sqlite")
            .with_secrets_key(test_secrets_key());
        store.migrate().await.expect("migrate sqlite");
        TestDb {
            store,
            schema: None,
            url,
            _dir: Some(dir),
        }
    }

    /// A new schema in the database named by TEST_DATABASE_URL. Tests that
    /// call this are ignored when it was not set at build time (build.rs).
    pub async fn postgres() -> TestDb {
        let url = postgres_url().expect("TEST_DATABASE_URL was set when the tests were built");
        let schema = format!("t_{}", ids::random_token(16).to_lowercase());
        let store = postgres::connect(&url, Some(&schema))
            .await
            .expect("connect to TEST_DATABASE_URL")
            .with_secrets_key(test_secrets_key());
        store.migrate().await.expect("migrate postgres");
        TestDb {
            store,
            schema: Some(schema),
            url,
            _dir: None,
        }
    }

    /// The URL a `dakghar` child process opens: for Postgres, with this
    /// test's schema as its search path.
    #[allow(dead_code)] // used by the separate cluster test binary
    pub fn process_url(&self) -> String {
        match &self.schema {
            Some(schema) => format!("{}?options[search_path]={schema}", self.url),
            None => self.url.clone(),
        }
    }

    /// SQLite only: a connection to the file as another process would
    /// open it, holding the write lock `begin` takes (`BEGIN IMMEDIATE`,
    /// `BEGIN EXCLUSIVE`) until it commits or is dropped.
    #[allow(dead_code)]
    pub async fn another_process_locking(&self, begin: &str) -> sqlx::SqliteConnection {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(&self.process_url())
            .await
            .unwrap();
        sqlx::query(begin).execute(&mut conn).await.unwrap();
        conn
    }

    /// Postgres only: the address of the database server.
    #[allow(dead_code)]
    pub async fn postgres_addr(&self) -> Option<SocketAddr> {
        self.schema.as_ref()?;
        let url = reqwest::Url::parse(&self.url).expect("TEST_DATABASE_URL is a URL");
        let host = url.host_str().unwrap_or("127.0.0.1").to_string();
        let port = url.port().unwrap_or(5432);
        let mut found = tokio::net::lookup_host((host.as_str(), port))
            .await
            .expect("resolve the Postgres host");
        found.next()
    }

    /// Postgres only: a store of this test's schema that connects to `addr`
    /// (a proxy in front of the server) instead.
    #[allow(dead_code)]
    pub async fn postgres_store_at(&self, addr: SocketAddr) -> Option<Store> {
        let schema = self.schema.as_ref()?;
        let mut url = reqwest::Url::parse(&self.url).expect("TEST_DATABASE_URL is a URL");
        url.set_host(Some(&addr.ip().to_string())).unwrap();
        url.set_port(Some(addr.port())).unwrap();
        let store = postgres::connect(url.as_str(), Some(schema))
            .await
            .expect("connect through the proxy");
        Some(store.with_secrets_key(test_secrets_key()))
    }

    /// Postgres only: a store of this test's schema with a single pooled
    /// connection, so each call runs on the connection the last one left.
    #[allow(dead_code)]
    pub async fn postgres_store_of_one_connection(&self) -> Option<Store> {
        let schema = self.schema.as_ref()?;
        let store = postgres::connect_pooled(&self.url, Some(schema), 1)
            .await
            .expect("connect with one connection");
        Some(store.with_secrets_key(test_secrets_key()))
    }

    /// A second connection pool on the same database, as another node of
    /// the same installation would open.
    pub async fn another_node(&self) -> Store {
        let store = match &self.schema {
            Some(schema) => postgres::connect(&self.url, Some(schema)).await,
            None => Store::connect(Some(&self.url)).await,
        };
        store
            .expect("connect another node")
            .with_secrets_key(test_secrets_key())
    }

    /// A connection of its own to this test's database, for reading what
    /// the store's API does not show (raw columns, Postgres statistics).
    pub async fn raw(&self) -> Raw {
        match &self.schema {
            Some(schema) => {
                let options: sqlx::postgres::PgConnectOptions = self
                    .url
                    .parse()
                    .expect("TEST_DATABASE_URL is a Postgres URL");
                let pool = sqlx::postgres::PgPoolOptions::new()
                    .max_connections(2)
                    .connect_with(options.options([("search_path", schema.as_str())]))
                    .await
                    .expect("connect to the test schema");
                Raw::Postgres(pool)
            }
            None => Raw::Sqlite(
                sqlx::SqlitePool::connect(&self.url)
                    .await
                    .expect("open the test's SQLite file"),
            ),
        }
    }

    /// Drops the test's schema; a failed test leaves it behind to inspect.
    pub async fn finish(self) {
        self.store.close().await;
        if let Some(schema) = self.schema {
            if let Ok(admin) = postgres::connect(&self.url, None).await {
                let _ = admin
                    .execute_script(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await;
                admin.close().await;
            }
        }
    }
}

/// See `TestDb::raw`.
pub enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

/// Waits until some backend in `pg_stat_activity` matches `filter` (a
/// condition on its columns, binding `args` as $1, $2, …), and fails the
/// test after `within` saying it never saw `what`.
pub async fn wait_for_activity(
    pool: &sqlx::PgPool,
    filter: &str,
    args: &[&str],
    within: std::time::Duration,
    what: &str,
) {
    let sql = format!("SELECT count(*) FROM pg_stat_activity WHERE {filter}");
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let mut query = sqlx::query_scalar::<_, i64>(&sql);
        for arg in args {
            query = query.bind(*arg);
        }
        if query.fetch_one(pool).await.unwrap() > 0 {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

pub fn postgres_url() -> Option<String> {
    match std::env::var("TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "TEST_DATABASE_URL must be set on CI: the Postgres suite may not be skipped"
            );
            None
        }
    }
}

pub const PASSWORD: &str = "correct horse battery staple";

pub struct Seeded {
    pub account: Account,
    pub user: User,
}

/// An account with one member whose password is `PASSWORD`.
pub async fn seed_user(store: &Store, clock: &dyn Clock, account: &str, email: &str) -> Seeded {
    let account = store
        .create_account(account, clock.now())
        .await
        .expect("account");
    let hash = password::hash(PASSWORD).expect("hash");
    let user = store
        .create_user(&account.id, email, &hash, Role::Member, clock.now())
        .await
        .expect("user");
    Seeded { account, user }
}

pub struct TestApp {
    pub base: String,
    /// `http://` and the address of `/metrics` when it has its own.
    pub metrics_base: Option<String>,
    pub store: Store,
    pub clock: TestClock,
    pub engine: Arc<dakghar::delivery::engine::Engine>,
    /// What the server's handlers share, for calling the domain directly.
    pub ctx: Arc<dakghar::context::Ctx>,
    stop: CancellationToken,
    served: Mutex<Option<JoinHandle<std::io::Result<()>>>>,
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// What Ctrl-C does to `serve`: stop, let attempts finish within the
    /// grace period, hand back the rest. Returns once it has all happened.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        let served = self.served.lock().unwrap().take();
        if let Some(served) = served {
            served.await.expect("server task").expect("server");
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // Workers hold database connections; stop them before the pool closes.
        self.stop.cancel();
    }
}

pub async fn spawn_app(store: Store) -> TestApp {
    spawn_app_with(store, ServeConfig::for_tests()).await
}

pub async fn spawn_app_with(store: Store, config: ServeConfig) -> TestApp {
    spawn_node(store, config, TestClock::starting_now()).await
}

/// Another server on the same database, sharing `clock` as nodes share time.
pub async fn spawn_node(store: Store, config: ServeConfig, clock: TestClock) -> TestApp {
    let app = Application::build(config, store.clone(), Arc::new(clock.clone()))
        .await
        .expect("build app");
    let base = format!("http://{}", app.local_addr());
    let metrics_base = app.metrics_addr().map(|a| format!("http://{a}"));
    let engine = app.engine();
    let ctx = app.context();
    let stop = CancellationToken::new();
    let served = tokio::spawn(app.run_until(stop.clone().cancelled_owned()));
    TestApp {
        base,
        metrics_base,
        store,
        clock,
        engine,
        ctx,
        stop,
        served: Mutex::new(Some(served)),
    }
}

/// Where a redirect points.
pub fn location(res: &reqwest::Response) -> String {
    res.headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// A client that keeps cookies and does not follow redirects, so tests see
/// exactly what the server answered.
pub fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        // A page that never finishes fails its test, naming the URL, instead
        // of holding the whole run (one did, once, in a full run on SQLite).
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .expect("client")
}

/// A browser signed in as `email` (whose password is [`PASSWORD`]).
pub async fn signed_in(app: &TestApp, email: &str) -> reqwest::Client {
    let web = browser();
    let res = web
        .post(app.url("/login"))
        .form(&[("email", email), ("password", PASSWORD), ("next", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(location(&res), "/events", "{email} signs in");
    web
}

/// A signed-in browser of a new member of `account` with `role`, whose
/// password is `PASSWORD`.
pub async fn member(
    app: &TestApp,
    account: &str,
    email: &str,
    role: AccountRole,
) -> reqwest::Client {
    let hash = password::hash(PASSWORD).unwrap();
    app.store
        .create_member(account, email, &hash, Role::Member, role, app.clock.now())
        .await
        .unwrap();
    signed_in(app, email).await
}

/// A page as the browser gets it.
pub async fn page_html(web: &reqwest::Client, url: &str) -> String {
    web.get(url).send().await.unwrap().text().await.unwrap()
}

/// Calls a server function as `web`, the way the hydrated page does (a
/// plain form post gets a redirect); returns the status and the JSON answer.
pub async fn server_fn(
    app: &TestApp,
    web: &reqwest::Client,
    function: &str,
    form: &[(&str, &str)],
) -> (reqwest::StatusCode, serde_json::Value) {
    let res = web
        .post(app.url(&format!("/_fn/{function}")))
        .header("accept", "application/json")
        .form(form)
        .send()
        .await
        .unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or_default())
}

/// Posts a server function's form as a page without JavaScript does, from
/// `page`: the answer is a redirect, back to that page on an error.
pub async fn form_post(
    app: &TestApp,
    web: &reqwest::Client,
    function: &str,
    page: &str,
    form: &[(&str, &str)],
) -> reqwest::Response {
    web.post(app.url(&format!("/_fn/{function}")))
        .header("accept", "text/html,application/xhtml+xml")
        .header("referer", page)
        .form(form)
        .send()
        .await
        .unwrap()
}
