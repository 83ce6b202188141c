//! The keys this node has seen authenticate, for ingest only: a producer
//! sending events asks the database who its key is once, not once per
//! event (at the bench's mixed load the lookup was the statement Postgres
//! ran most often per event). A cached key is never trusted on its own:
//! the ingest write stores an event only if the key is still active in
//! the same statement (`NewIngest::key_id`), so a key revoked on
//! any node, or with its account deleted, stores nothing from the moment
//! the revocation commits.

use super::{bounded::Bounded, KeyHolder};

/// More keys than a whole installation should hold; past it the cache
/// starts again rather than grow with keys that were revoked elsewhere.
const MOST: usize = 10_000;

/// The key's hash → whose it is.
#[derive(Debug)]
pub struct KeyCache(Bounded<KeyHolder>);

impl Default for KeyCache {
    fn default() -> Self {
        Self(Bounded::new(MOST))
    }
}

impl KeyCache {
    pub fn get(&self, hash: &str) -> Option<KeyHolder> {
        self.0.get(hash)
    }

    pub fn keep(&self, hash: String, holder: KeyHolder) {
        self.0.keep(hash, holder);
    }

    /// The write found the key revoked: it is asked about afresh.
    pub fn forget(&self, key_id: &str) {
        self.0.forget_where(|holder| holder.key_id() == key_id);
    }
}
