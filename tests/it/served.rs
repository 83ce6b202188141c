//! The real `dakghar` binary as a child process of a test.

use std::process::Child;

use dakghar::{
    auth::api_key,
    clock::{Clock, SystemClock},
    store::{NewEndpoint, Store},
};

pub const BIN: &str = env!("CARGO_BIN_EXE_dakghar");
/// The signing secret of the endpoint `tenant` makes.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `dakghar serve` child that dies with its test: without this, a failed
/// assertion left the server running after the test process, claiming
/// against its schema.
pub struct Served(pub Child);

impl Served {
    /// SIGKILL, and reaped.
    pub fn kill(&mut self) -> std::io::Result<()> {
        self.0.kill()?;
        self.0.wait().map(drop)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// An account with an API key and one endpoint on `url`.
pub async fn tenant(store: &Store, url: &str, max_in_flight: i64) -> String {
    let now = SystemClock.now();
    let account = store.create_account("acme", now).await.unwrap();
    let key = api_key::generate();
    store
        .create_api_key(&account.id, "", &key.prefix, &key.hash, false, now)
        .await
        .unwrap();
    store
        .create_endpoint(
            NewEndpoint {
                account_id: account.id,
                url: url.to_string(),
                description: String::new(),
                event_types: vec![],
                secret: SECRET.into(),
                rate_limit_per_sec: None,
                max_in_flight,
                retry_strategy: None,
                retry_statuses: None,
            },
            now,
        )
        .await
        .unwrap();
    key.key
}
