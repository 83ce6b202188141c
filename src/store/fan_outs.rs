//! Each account's fan-out as this node last read it, for Postgres's
//! ingest (migration 0034): the endpoints an event may go to, with the
//! account's `endpoints_version` at the read. The write stores an
//! account's events only while that version is still the account's, so
//! a cached fan-out is never older than a read just before the write
//! would be; one found stale is read again.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use super::ingest::Target;

/// More accounts than one node's producers should send for at once; past
/// it the cache starts again rather than grow.
const MOST: usize = 1_000;

#[derive(Debug)]
pub(super) struct FanOut {
    pub version: i64,
    pub targets: Vec<Target>,
}

#[derive(Debug, Default)]
pub(super) struct FanOuts(Mutex<HashMap<String, Arc<FanOut>>>);

impl FanOuts {
    /// Those of `accounts` this node holds.
    pub fn get(&self, accounts: &[String]) -> HashMap<String, Arc<FanOut>> {
        let held = self.lock();
        accounts
            .iter()
            .filter_map(|a| held.get(a).map(|f| (a.clone(), Arc::clone(f))))
            .collect()
    }

    pub fn keep(&self, account: String, fan_out: Arc<FanOut>) {
        let mut held = self.lock();
        if held.len() >= MOST {
            held.clear();
        }
        held.insert(account, fan_out);
    }

    pub fn forget(&self, account: &str) {
        self.lock().remove(account);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<FanOut>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
