//! When each API key was last used, for the keys pages: recorded at most
//! once a minute per key on each node, so a busy producer costs one write
//! a minute rather than one per request.

use std::{collections::HashMap, sync::Mutex};

use super::Store;
use crate::clock::Timestamp;

const EVERY_MS: i64 = 60_000;

#[derive(Debug, Default)]
pub struct KeyUses {
    /// Key id → when this node last recorded a use.
    recorded: Mutex<HashMap<String, i64>>,
}

impl KeyUses {
    pub async fn record(&self, store: &Store, platform: bool, key_id: &str, now: Timestamp) {
        {
            let mut recorded = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
            match recorded.get(key_id) {
                Some(at) if now.millis() - at < EVERY_MS => return,
                _ => recorded.insert(key_id.to_string(), now.millis()),
            };
        }
        // A key that authenticated is usable whether or not this lands.
        if let Err(e) = store.key_used(platform, key_id, now).await {
            tracing::warn!(key = %key_id, error = %e, "could not record the key's use");
        }
    }
}
