//! SQL text both backends share, built once. What only one backend runs
//! lives in `sqlite.rs` or `postgres.rs`.

use std::sync::LazyLock;

/// `$from, $from+1, …`: `n` placeholders for an IN list.
pub(super) fn placeholders(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A 2xx: streaks reset, circuit closed, failing-since cleared. ($1 now,
/// $2 id.) `$3` successes of attempts started from `$4` on count towards
/// the adaptive cap: it grows by one after as many successes in a row as
/// it allows, back to `max_in_flight`. Successes of attempts that were
/// already in flight at the last cut (started no later than it) say
/// nothing about the lower cap. Postgres's batch of results runs a copy
/// inside `dakghar_record_attempts` (migration 0038): change both
/// together; the adaptive-cap tests run on both backends.
pub(super) static ENDPOINT_SUCCEEDED: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE endpoints SET {} WHERE id = $2",
        endpoint_succeeded_set("$1", "$3", "$4")
    )
});

/// `ENDPOINT_SUCCEEDED`'s assignments, with what stands for its `$1`
/// (`at`), `$3` (`delivered`) and `$4` (`first_started`): SQLite's batch
/// of results updates several endpoints in one statement with them.
pub(super) fn endpoint_succeeded_set(at: &str, delivered: &str, first_started: &str) -> String {
    format!(
        "failure_streak = 0, transient_streak = 0, failing_since = NULL, \
         last_success_at = {at}, circuit_state = 'closed', circuit_open_until = NULL, \
         circuit_cooldown_ms = 0, alert_level = 0, alert_expiry_for = NULL, throttle_streak = 0, \
         fault = NULL, fault_at = NULL, fault_streak = 0, \
         success_run = CASE WHEN adaptive_cap IS NULL THEN 0 \
           WHEN cap_cut_at >= {first_started} THEN success_run \
           WHEN success_run + {delivered} >= adaptive_cap THEN 0 \
           ELSE success_run + {delivered} END, \
         adaptive_cap = CASE WHEN adaptive_cap IS NULL OR cap_cut_at >= {first_started} \
             OR success_run + {delivered} < adaptive_cap THEN adaptive_cap \
           WHEN adaptive_cap + 1 >= max_in_flight THEN NULL ELSE adaptive_cap + 1 END, \
         updated_at = {at}"
    )
}

/// What every exit of a claim clears: the claim is no one's any more.
pub(super) const UNCLAIMED: &str = "claimed_at = NULL, lease_until = NULL, claim_token = NULL";

/// Hands back everything claim `$2` holds, pending again at `$1`: a claim
/// or an ingest's lease whose rows will not decode attempts none of them.
pub(super) static HAND_BACK_CLAIM: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE deliveries SET state = 'pending', {UNCLAIMED}, updated_at = $1 \
         WHERE state = 'in_flight' AND claim_token = $2"
    )
});
