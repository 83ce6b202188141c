//! The installation-wide limits a claim applies besides each endpoint's
//! own (SPEC §11), as both backends' claims take them.

use crate::clock::Timestamp;

/// The limits every claim applies on top of each endpoint's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClaimRules {
    /// Starts per second for endpoints without their own limit; 0 is none.
    pub default_rate: i64,
    /// Attempts in flight per receiver host across all endpoints; 0 is none.
    pub host_cap: i64,
}

impl ClaimRules {
    /// The start of the one-second rate window `now` falls in.
    pub(super) fn rate_window(self, now: Timestamp) -> i64 {
        now.millis().div_euclid(1000) * 1000
    }
}
