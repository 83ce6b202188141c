//! Time as the code sees it. Nothing reads the wall clock directly, so tests
//! can jump 72 hours without sleeping.

use std::{
    fmt,
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc,
    },
    time::Duration,
};

/// Milliseconds since the Unix epoch: the one time unit stored in every table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn millis(self) -> i64 {
        self.0
    }

    pub fn unix_seconds(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// Saturates instead of overflowing: a far-future deadline stays far in the future.
    pub fn plus(self, d: Duration) -> Timestamp {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(ms))
    }

    pub fn minus(self, d: Duration) -> Timestamp {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_sub(ms))
    }

    /// How long from `self` until `later`; zero when `later` is not later.
    pub fn until(self, later: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(later.0.saturating_sub(self.0)).unwrap_or(0))
    }

    pub fn to_rfc3339(self) -> String {
        chrono::DateTime::from_timestamp_millis(self.0)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_default()
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

pub trait Clock: Send + Sync + fmt::Debug + 'static {
    fn now(&self) -> Timestamp;
}

pub type SharedClock = Arc<dyn Clock>;

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp(chrono::Utc::now().timestamp_millis())
    }
}

/// A clock that only moves when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct TestClock(Arc<AtomicI64>);

impl TestClock {
    pub fn at(start: Timestamp) -> Self {
        Self(Arc::new(AtomicI64::new(start.0)))
    }

    /// Starts at the real current time, so signatures stay verifiable by receivers.
    pub fn starting_now() -> Self {
        Self::at(SystemClock.now())
    }

    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn set(&self, t: Timestamp) {
        self.0.store(t.0, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_clock_jumps_72_hours_at_once() {
        let clock = TestClock::at(Timestamp(1_000));
        clock.advance(Duration::from_secs(72 * 3600));
        assert_eq!(clock.now(), Timestamp(1_000 + 72 * 3600 * 1000));
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(
            Timestamp(i64::MAX - 1).plus(Duration::MAX),
            Timestamp(i64::MAX)
        );
        assert_eq!(Timestamp(5).until(Timestamp(1)), Duration::ZERO);
        assert_eq!(Timestamp(1).until(Timestamp(1_001)), Duration::from_secs(1));
    }
}
