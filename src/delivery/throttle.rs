//! What a receiver's "slow down" does to its whole endpoint (SPEC §11):
//! a 429 or 503 holds every delivery of the endpoint until the receiver's
//! time (Retry-After, else the backoff of the throttle streak), and the
//! held work comes back spread over a short window after it, not all at
//! once; a 429, 503 or timeout also halves the adaptive in-flight cap.
//! Pure functions; the engine applies them (`endpoint_health.rs`,
//! `attempt.rs`).

use std::time::Duration;

use rand::Rng;

use super::{backoff::Backoff, retry_after};
use crate::{clock::Timestamp, store::Endpoint};

/// The shortest window throttled work comes back over.
const MIN_SPREAD: Duration = Duration::from_secs(1);

/// Whether this answer asks the endpoint to hold all its work.
pub fn throttles(status: Option<u16>) -> bool {
    matches!(status, Some(429 | 503))
}

/// Whether this answer halves the endpoint's adaptive in-flight cap: the
/// receiver said it is overloaded, or did not answer in time.
pub fn slows_down(status: Option<u16>, timed_out: bool) -> bool {
    throttles(status) || (status.is_none() && timed_out)
}

/// How long the endpoint waits after a 429/503: the receiver's
/// Retry-After if it gave one, else the backoff for `streak` throttles in
/// a row (`streak` ≥ 1, this one counted); never past `longest` (the
/// retry window: every delivery held longer would expire anyway).
pub fn wait(
    retry_after: Option<&str>,
    streak: i64,
    backoff: &Backoff,
    longest: Duration,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Duration {
    retry_after
        .and_then(|v| retry_after::parse(v, now))
        .unwrap_or_else(|| backoff.delay(u32::try_from(streak.max(1)).unwrap_or(u32::MAX), rng))
        .min(longest)
}

/// The window throttled work comes back over: a tenth of the wait, at
/// least a second.
pub fn spread(throttled_at: i64, throttled_until: i64) -> Duration {
    let wait = Duration::from_millis(u64::try_from(throttled_until - throttled_at).unwrap_or(0));
    (wait / 10).max(MIN_SPREAD)
}

/// When a claimed delivery of a throttled endpoint may go, if not now:
/// the throttle's end plus the delivery's own place in the spread. The
/// place comes from the delivery's id, so a delivery handed back and
/// claimed again keeps it, and every node agrees.
pub fn release_at(endpoint: &Endpoint, delivery_id: &str, now: Timestamp) -> Option<Timestamp> {
    let (until, at) = (endpoint.throttled_until?, endpoint.throttled_at?);
    let spread_ms = u64::try_from(spread(at, until).as_millis())
        .unwrap_or(1)
        .max(1);
    let offset = i64::try_from(fnv1a(delivery_id.as_bytes()) % spread_ms).unwrap_or(0);
    let release = until.saturating_add(offset);
    (now.millis() < release).then_some(Timestamp(release))
}

/// A small stable hash (FNV-1a), the same in every process and version.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use rand::{rngs::StdRng, SeedableRng};

    use super::*;
    use crate::delivery::backoff::Jitter;

    const NOW: Timestamp = Timestamp(1_800_000_000_000);

    #[test]
    fn which_answers_throttle_and_which_slow_down() {
        let cases = [
            (Some(429), false, true, true),
            (Some(503), false, true, true),
            (Some(500), false, false, false),
            (Some(502), false, false, false),
            (Some(200), false, false, false),
            (None, true, false, true),
            (None, false, false, false),
        ];
        for (status, timed_out, throttle, slow) in cases {
            assert_eq!(throttles(status), throttle, "{status:?} throttles");
            assert_eq!(
                slows_down(status, timed_out),
                slow,
                "{status:?} {timed_out} slows"
            );
        }
    }

    #[test]
    fn the_wait_is_the_receivers_else_the_streaks_backoff() {
        let backoff = Backoff {
            base: Duration::from_secs(10),
            cap: Duration::from_secs(100),
            jitter: Jitter::Equal,
            ..Backoff::default()
        };
        let mut rng = StdRng::seed_from_u64(7);
        let cases: [(Option<&str>, i64, u64, u64); 7] = [
            (Some("30"), 1, 30, 30),
            (Some("99999999999"), 1, 1000, 1000),
            (Some("30"), 5, 30, 30),
            (Some("not a time"), 1, 5, 10),
            (None, 1, 5, 10),
            (None, 3, 20, 40),
            (None, 9, 50, 100),
        ];
        for (asked, streak, lo, hi) in cases {
            let longest = Duration::from_secs(1000);
            let w = wait(asked, streak, &backoff, longest, NOW, &mut rng).as_secs();
            assert!((lo..=hi).contains(&w), "{asked:?} streak {streak}: {w}s");
        }
    }

    #[test]
    fn the_spread_is_a_tenth_of_the_wait_and_at_least_a_second() {
        let cases = [
            (30_000, 3_000),
            (5_000, 1_000),
            (0, 1_000),
            (3_600_000, 360_000),
        ];
        for (wait_ms, spread_ms) in cases {
            assert_eq!(
                spread(0, wait_ms),
                Duration::from_millis(spread_ms),
                "{wait_ms}"
            );
        }
    }

    fn throttled(at: i64, until: i64) -> Endpoint {
        let mut e = Endpoint::example();
        e.throttled_at = Some(at);
        e.throttled_until = Some(until);
        e
    }

    #[test]
    fn held_work_comes_back_spread_over_the_window() {
        let (at, until) = (NOW.millis(), NOW.millis() + 30_000);
        let ep = throttled(at, until);
        let releases: Vec<i64> = (0..200)
            .map(|i| release_at(&ep, &format!("dlv_{i}"), NOW).unwrap().millis())
            .collect();
        assert!(releases.iter().all(|r| (until..until + 3_000).contains(r)));
        let early = releases.iter().filter(|r| **r < until + 1_500).count();
        assert!(
            (60..140).contains(&early),
            "about half in the first half: {early}"
        );
        // The same delivery keeps its place, and goes once its place passed.
        let first = release_at(&ep, "dlv_0", NOW).unwrap();
        assert_eq!(
            release_at(&ep, "dlv_0", Timestamp(until)),
            Some(first).filter(|f| f.millis() > until)
        );
        assert_eq!(release_at(&ep, "dlv_0", first), None);
        assert_eq!(release_at(&ep, "dlv_0", Timestamp(until + 3_000)), None);
    }

    #[test]
    fn an_endpoint_never_throttled_holds_nothing() {
        let ep = Endpoint::example();
        assert_eq!(release_at(&ep, "dlv_0", NOW), None);
    }
}
