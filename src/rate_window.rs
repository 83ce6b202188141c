//! "At most N per window" counters keyed by id, on the code's own clock, so
//! tests move them with the test clock. Used for per-endpoint delivery starts
//! (per second) and resends (per minute).

use std::{collections::HashMap, sync::Mutex, time::Duration};

use crate::clock::Timestamp;

#[derive(Debug)]
pub struct FixedWindow {
    window_ms: i64,
    counts: Mutex<HashMap<String, (i64, i64)>>,
}

impl FixedWindow {
    pub fn new(window: Duration) -> Self {
        FixedWindow {
            window_ms: i64::try_from(window.as_millis()).unwrap_or(i64::MAX).max(1),
            counts: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one use of `key` if it fits under `limit`; otherwise counts
    /// nothing and returns when the next window opens.
    pub fn take(&self, key: &str, limit: i64, now: Timestamp) -> Option<Timestamp> {
        let window = now.millis().div_euclid(self.window_ms);
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let entry = counts.entry(key.to_string()).or_insert((window, 0));
        if entry.0 != window {
            *entry = (window, 0);
        }
        if entry.1 >= limit {
            return Some(Timestamp((window + 1).saturating_mul(self.window_ms)));
        }
        entry.1 += 1;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_key_and_reopens_with_the_next_window() {
        let w = FixedWindow::new(Duration::from_secs(60));
        let t = Timestamp(120_500);
        assert_eq!((w.take("a", 2, t), w.take("a", 2, t)), (None, None));
        assert_eq!(w.take("a", 2, t), Some(Timestamp(180_000)));
        assert_eq!(w.take("b", 2, t), None, "keys are independent");
        assert_eq!(w.take("a", 2, Timestamp(180_000)), None);
    }
}
