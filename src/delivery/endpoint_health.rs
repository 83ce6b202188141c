//! How one attempt's result moves its endpoint (SPEC §4): the circuit
//! breaker (open after a streak of transient failures, for a cooldown
//! that grows while failures continue; half-open lets one trial through)
//! and dead endpoints (paused after a streak of permanent failures, a 410,
//! or a day without success while deliveries dead-letter). The rules are
//! pure functions; `Engine::update_endpoint_health` applies them.

use std::time::Duration;

use super::{
    classify::Verdict, engine::LOG_TARGET, error::DeliveryError, settings::DeliverySettings,
    throttle, Engine,
};
use crate::{
    clock::Timestamp,
    jobs::alerts::texts,
    store::{CircuitState, Endpoint, EndpointFailure, Transition},
};

/// The cooldown to open the circuit for, if this failure opens it.
/// `updated` is the endpoint with this failure counted.
pub fn opens_circuit(
    verdict: Verdict,
    updated: &Endpoint,
    settings: &DeliverySettings,
) -> Option<Duration> {
    // Results of attempts that were already in flight when the circuit
    // opened must not open it again: each reopening doubles the
    // cooldown, and a batch of 500 would push it straight to the cap.
    let opens = verdict.is_retry()
        && updated.transient_streak >= settings.circuit_threshold
        && updated.circuit_state != CircuitState::Open;
    opens.then(|| {
        let grown =
            Duration::from_millis(u64::try_from(updated.circuit_cooldown_ms).unwrap_or(0) * 2);
        grown
            .max(settings.circuit_base_cooldown)
            .min(settings.circuit_max_cooldown)
    })
}

/// Why the endpoint is dead and must be paused, if it is.
pub fn dead_reason(
    verdict: Verdict,
    transition: Transition,
    updated: &Endpoint,
    settings: &DeliverySettings,
    now: Timestamp,
) -> Option<String> {
    let dead_lettered = matches!(transition, Transition::Failed | Transition::Expired);
    let failing_for = updated
        .failing_since
        .map(|since| Timestamp(since).until(now));
    if verdict == Verdict::Gone {
        Some("the endpoint answered 410 Gone".to_string())
    } else if updated.failure_streak >= settings.dead_streak {
        Some(format!(
            "{} permanent failures in a row",
            updated.failure_streak
        ))
    } else if dead_lettered && failing_for.is_some_and(|d| d >= settings.dead_after) {
        Some("no successful delivery for 24 hours while deliveries dead-letter".to_string())
    } else {
        None
    }
}

/// What the engine knows of one finished attempt, for its endpoint.
#[derive(Debug, Clone, Copy)]
pub(super) struct AttemptSeen<'a> {
    pub verdict: Verdict,
    pub transition: Transition,
    pub status: Option<u16>,
    pub retry_after: Option<&'a str>,
    pub timed_out: bool,
    pub started: Timestamp,
}

impl Engine {
    pub(super) async fn update_endpoint_health(
        &self,
        endpoint: &Endpoint,
        seen: AttemptSeen<'_>,
        now: Timestamp,
    ) -> Result<(), DeliveryError> {
        let AttemptSeen {
            verdict,
            transition,
            status,
            ..
        } = seen;
        if verdict == Verdict::Delivered {
            // Recorded with the attempt, in the same transaction.
            return Ok(());
        }
        let store = &self.store;
        let slow_down = throttle::slows_down(status, seen.timed_out);
        let updated = store
            .endpoint_failed(
                &endpoint.id,
                EndpointFailure {
                    transient: verdict.is_retry(),
                    permanent: verdict.is_permanent_failure(),
                    slow_down,
                    throttled: throttle::throttles(status),
                    started: seen.started,
                },
                now,
            )
            .await?;
        if slow_down && updated.cap_cut_at == Some(now.millis()) {
            metrics::counter!("dakghar_in_flight_cap_cuts_total").increment(1);
            tracing::warn!(target: LOG_TARGET, endpoint = %endpoint.id, cap = updated.adaptive_in_flight(), max_in_flight = updated.max_in_flight, "in-flight cap halved");
        }
        self.throttle(&updated, seen, now).await?;
        if let Some(cooldown) = opens_circuit(verdict, &updated, &self.settings) {
            let ms = i64::try_from(cooldown.as_millis()).unwrap_or(i64::MAX);
            store
                .open_circuit(&endpoint.id, now.plus(cooldown), ms, now)
                .await?;
            tracing::warn!(target: LOG_TARGET, endpoint = %endpoint.id, cooldown_s = cooldown.as_secs(), "circuit opened");
        } else if updated.circuit_state == CircuitState::HalfOpen {
            // A permanent answer to the trial still shows the receiver is up.
            store.endpoint_succeeded(&endpoint.id, now).await?;
        }
        let Some(reason) = dead_reason(verdict, transition, &updated, &self.settings, now) else {
            return Ok(());
        };
        if store
            .pause_dead_endpoint(&endpoint.id, &reason, now)
            .await?
        {
            tracing::warn!(target: LOG_TARGET, endpoint = %endpoint.id, reason = %reason, "endpoint paused");
            texts::endpoint_paused(&endpoint.url, &reason)
                .write(store, &endpoint.account_id, Some(&endpoint.id), now)
                .await?;
        }
        Ok(())
    }

    /// A 429/503 holds the whole endpoint. An answer to an attempt that
    /// was already in flight when an earlier throttle began does not grow
    /// the streak; without a Retry-After of its own it changes nothing.
    async fn throttle(
        &self,
        updated: &Endpoint,
        seen: AttemptSeen<'_>,
        now: Timestamp,
    ) -> Result<(), DeliveryError> {
        let Some(status) = seen.status.filter(|_| throttle::throttles(seen.status)) else {
            return Ok(());
        };
        let fresh = updated
            .throttled_until
            .is_none_or(|until| until <= seen.started.millis());
        if !fresh && seen.retry_after.is_none() {
            return Ok(());
        }
        let wait = throttle::wait(
            seen.retry_after,
            updated.throttle_streak,
            &self.settings.backoff,
            self.settings.retry_window,
            now,
            &mut rand::thread_rng(),
        );
        let until = now.plus(wait);
        if self
            .store
            .throttle_endpoint(&updated.id, until, i64::from(status), now)
            .await?
        {
            metrics::counter!("dakghar_throttles_total", "status" => status.to_string())
                .increment(1);
            tracing::warn!(target: LOG_TARGET, endpoint = %updated.id, status, wait_s = wait.as_secs(), streak = updated.throttle_streak, "endpoint throttled");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::classify::classify;

    const NOW: Timestamp = Timestamp(1_800_000_000_000);
    const HOUR: Duration = Duration::from_secs(3600);

    fn endpoint() -> Endpoint {
        Endpoint::example()
    }

    #[test]
    fn the_circuit_opens_after_a_transient_streak_with_a_growing_capped_cooldown() {
        let s = DeliverySettings::default();
        let with = |streak: i64, state: CircuitState, cooldown_ms: i64| Endpoint {
            transient_streak: streak,
            circuit_state: state,
            circuit_cooldown_ms: cooldown_ms,
            ..endpoint()
        };
        let secs = |d: Option<Duration>| d.map(|d| d.as_secs());
        let table: &[(&str, Verdict, Endpoint, Option<u64>)] = &[
            (
                "below the threshold",
                classify(Some(500)),
                with(4, CircuitState::Closed, 0),
                None,
            ),
            (
                "at the threshold: the base cooldown",
                classify(Some(500)),
                with(5, CircuitState::Closed, 0),
                Some(30),
            ),
            (
                "no answer counts too",
                classify(None),
                with(5, CircuitState::Closed, 0),
                Some(30),
            ),
            (
                "a 404 counts too",
                classify(Some(404)),
                with(5, CircuitState::Closed, 0),
                Some(30),
            ),
            (
                "a failed trial doubles it",
                classify(Some(503)),
                with(6, CircuitState::HalfOpen, 30_000),
                Some(60),
            ),
            (
                "capped at an hour",
                classify(Some(503)),
                with(9, CircuitState::HalfOpen, 3_000_000),
                Some(3600),
            ),
            (
                "results of attempts in flight never reopen it",
                classify(Some(500)),
                with(9, CircuitState::Open, 30_000),
                None,
            ),
            (
                "permanent failures never open it",
                classify(Some(400)),
                with(9, CircuitState::Closed, 0),
                None,
            ),
        ];
        for (rule, verdict, updated, cooldown) in table {
            assert_eq!(
                secs(opens_circuit(*verdict, updated, &s)),
                *cooldown,
                "{rule}"
            );
        }
    }

    #[test]
    fn dead_endpoints_are_told_apart_from_failing_ones() {
        let s = DeliverySettings::default();
        let failing_for = |d: Duration| Endpoint {
            failing_since: Some(NOW.minus(d).millis()),
            ..endpoint()
        };
        let table: &[(&str, Verdict, Transition, Endpoint, Option<&str>)] = &[
            (
                "a 410 is dead at once",
                Verdict::Gone,
                Transition::Failed,
                endpoint(),
                Some("410 Gone"),
            ),
            (
                "100 permanent failures in a row",
                Verdict::Failed,
                Transition::Failed,
                Endpoint {
                    failure_streak: 100,
                    ..endpoint()
                },
                Some("100 permanent failures in a row"),
            ),
            (
                "99 are not yet",
                Verdict::Failed,
                Transition::Failed,
                Endpoint {
                    failure_streak: 99,
                    ..endpoint()
                },
                None,
            ),
            (
                "a day without success while dead-lettering",
                Verdict::Retry,
                Transition::Expired,
                failing_for(24 * HOUR),
                Some("no successful delivery for 24 hours"),
            ),
            (
                "a day failing but still retrying is not dead",
                Verdict::Retry,
                Transition::Retry {
                    next_attempt_at: NOW,
                },
                failing_for(24 * HOUR),
                None,
            ),
            (
                "dead-lettering for less than a day is not dead",
                Verdict::Retry,
                Transition::Expired,
                failing_for(23 * HOUR),
                None,
            ),
        ];
        for (rule, verdict, transition, updated, reason) in table {
            let got = dead_reason(*verdict, *transition, updated, &s, NOW);
            match reason {
                Some(want) => assert!(
                    got.as_deref().is_some_and(|g| g.contains(want)),
                    "{rule}: {got:?}"
                ),
                None => assert_eq!(got, None, "{rule}"),
            }
        }
    }
}
