//! SQL text both backends share, built once. What only one backend runs
//! lives in `sqlite.rs` or `postgres.rs`.

use std::sync::LazyLock;

/// Each active endpoint whose circuit lets work through, with how many
/// more deliveries it may have in flight (`free`, may be ≤ 0): a closed
/// circuit allows `max_in_flight`, a half-open one a single trial. Both
/// backends claim through it, in a transaction no other claim runs beside,
/// so `max_in_flight` holds across every node. `$1` is now.
pub(super) const CLAIM_SLOTS: &str = "SELECT e.id, \
       CASE WHEN e.circuit_state = 'closed' THEN e.max_in_flight ELSE 1 END \
         - (SELECT count(*) FROM deliveries b \
            WHERE b.endpoint_id = e.id AND b.state = 'in_flight') AS free \
     FROM endpoints e \
     WHERE e.state = 'active' AND (e.circuit_state <> 'open' OR e.circuit_open_until <= $1)";

/// `$from, $from+1, …`: `n` placeholders for an IN list.
pub(super) fn placeholders(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Endpoints with free slots and due work: `(id, free)`, `$1` now.
/// Built once: every claim and every poll runs it.
pub(super) static OPEN_SLOTS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT id, free FROM ({CLAIM_SLOTS}) s WHERE free > 0 AND EXISTS ( \
           SELECT 1 FROM deliveries d WHERE d.endpoint_id = s.id AND d.state = 'pending' \
             AND d.next_attempt_at <= $1)"
    )
});

/// Whether any endpoint has a free slot and due work.
pub(super) static ANY_OPEN_SLOT: LazyLock<String> =
    LazyLock::new(|| format!("{} LIMIT 1", *OPEN_SLOTS));

/// A 2xx: streaks reset, circuit closed, failing-since cleared. ($1 now, $2 id)
pub(super) const ENDPOINT_SUCCEEDED: &str =
    "UPDATE endpoints SET failure_streak = 0, transient_streak = 0, failing_since = NULL, \
     last_success_at = $1, circuit_state = 'closed', circuit_open_until = NULL, \
     circuit_cooldown_ms = 0, alert_level = 0, alert_expiry_for = NULL, \
     updated_at = $1 WHERE id = $2";

/// What every exit of a claim clears: the claim is no one's any more.
pub(super) const UNCLAIMED: &str = "claimed_at = NULL, lease_until = NULL, claim_token = NULL";
