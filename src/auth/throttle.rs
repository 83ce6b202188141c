//! How failed sign-ins slow an email down: a few mistakes are free, then
//! each failure locks the email for twice as long as the one before, up to
//! a cap. Counted per email, so one account under attack never locks out
//! another, and unknown emails throttle exactly like known ones.

use std::time::Duration;

/// Failures before the first lock: enough for typos and a forgotten caps lock.
pub const FREE_FAILURES: i64 = 4;
pub const MAX_LOCK: Duration = Duration::from_secs(15 * 60);
/// A failure this long after the previous one starts the count again.
pub const FORGET_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The lock that follows the `failures`-th failure in a row.
pub fn lock_after(failures: i64) -> Duration {
    let over = failures - FREE_FAILURES;
    if over <= 0 {
        return Duration::ZERO;
    }
    let secs = 1u64
        .checked_shl((over - 1).min(20) as u32)
        .unwrap_or(u64::MAX);
    Duration::from_secs(secs).min(MAX_LOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_failures_then_doubling_up_to_the_cap() {
        let locks: Vec<u64> = (1..=16).map(|n| lock_after(n).as_secs()).collect();
        assert_eq!(
            locks,
            [0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900]
        );
        assert_eq!(lock_after(i64::MAX), MAX_LOCK);
    }
}
