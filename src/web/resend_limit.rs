//! Resends per endpoint per minute (SPEC §5), shared by the API and the UI,
//! on the server's own clock.

use std::{collections::HashMap, sync::Mutex};

use crate::clock::Timestamp;

#[derive(Debug)]
pub struct ResendLimit {
    per_minute: i64,
    windows: Mutex<HashMap<String, (i64, i64)>>,
}

impl ResendLimit {
    pub fn new(per_minute: i64) -> Self {
        ResendLimit {
            per_minute,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one resend; over the limit, returns the seconds until the next minute.
    pub fn check(&self, endpoint_id: &str, now: Timestamp) -> Option<u64> {
        let minute = now.millis().div_euclid(60_000);
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let w = windows
            .entry(endpoint_id.to_string())
            .or_insert((minute, 0));
        if w.0 != minute {
            *w = (minute, 0);
        }
        if w.1 >= self.per_minute {
            let next = (minute + 1) * 60_000;
            return Some(u64::try_from((next - now.millis() + 999) / 1000).unwrap_or(60));
        }
        w.1 += 1;
        None
    }
}
