//! SQL text both backends share, built once. What only one backend runs
//! lives in `sqlite.rs` or `postgres.rs`.

/// `$from, $from+1, …`: `n` placeholders for an IN list.
pub(super) fn placeholders(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A 2xx: streaks reset, circuit closed, failing-since cleared. ($1 now, $2 id)
pub(super) const ENDPOINT_SUCCEEDED: &str =
    "UPDATE endpoints SET failure_streak = 0, transient_streak = 0, failing_since = NULL, \
     last_success_at = $1, circuit_state = 'closed', circuit_open_until = NULL, \
     circuit_cooldown_ms = 0, alert_level = 0, alert_expiry_for = NULL, \
     updated_at = $1 WHERE id = $2";

/// What every exit of a claim clears: the claim is no one's any more.
pub(super) const UNCLAIMED: &str = "claimed_at = NULL, lease_until = NULL, claim_token = NULL";
