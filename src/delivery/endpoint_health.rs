//! How one attempt's result moves its endpoint (SPEC §4): the circuit
//! breaker (open after a streak of transient failures, for a cooldown
//! that grows while failures continue; half-open lets one trial through)
//! and dead endpoints (paused after a streak of permanent failures, a 410,
//! or a day without success while deliveries dead-letter).

use std::time::Duration;

use super::{classify::Verdict, engine::Engine};
use crate::{
    clock::Timestamp,
    store::{CircuitState, Endpoint, StoreError, Transition},
};

impl Engine {
    pub(super) async fn update_endpoint_health(
        &self,
        endpoint: &Endpoint,
        verdict: Verdict,
        transition: Transition,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        if verdict == Verdict::Delivered {
            // Recorded with the attempt, in the same transaction.
            return Ok(());
        }
        let updated = self
            .store
            .endpoint_failed(
                &endpoint.id,
                verdict.is_retry(),
                verdict.is_permanent_failure(),
                now,
            )
            .await?;
        // Results of attempts that were already in flight when the circuit
        // opened must not open it again: each reopening doubles the
        // cooldown, and a batch of 500 would push it straight to the cap.
        let opens = verdict.is_retry()
            && updated.transient_streak >= self.settings.circuit_threshold
            && updated.circuit_state != CircuitState::Open;
        if opens {
            let grown =
                Duration::from_millis(u64::try_from(updated.circuit_cooldown_ms).unwrap_or(0) * 2);
            let cooldown = grown
                .max(self.settings.circuit_base_cooldown)
                .min(self.settings.circuit_max_cooldown);
            let ms = i64::try_from(cooldown.as_millis()).unwrap_or(i64::MAX);
            self.store
                .open_circuit(&endpoint.id, now.plus(cooldown), ms, now)
                .await?;
            tracing::warn!(endpoint = %endpoint.id, cooldown_s = cooldown.as_secs(), "circuit opened");
        } else if updated.circuit_state == CircuitState::HalfOpen {
            // A permanent answer to the trial still shows the receiver is up.
            self.store.endpoint_succeeded(&endpoint.id, now).await?;
        }
        let dead_lettered = matches!(transition, Transition::Failed | Transition::Expired);
        let failing_for = updated
            .failing_since
            .map(|since| Timestamp(since).until(now));
        let reason = if verdict == Verdict::Gone {
            Some("the endpoint answered 410 Gone".to_string())
        } else if updated.failure_streak >= self.settings.dead_streak {
            Some(format!(
                "{} permanent failures in a row",
                updated.failure_streak
            ))
        } else if dead_lettered && failing_for.is_some_and(|d| d >= self.settings.dead_after) {
            Some("no successful delivery for 24 hours while deliveries dead-letter".to_string())
        } else {
            None
        };
        if let Some(reason) = reason {
            if self
                .store
                .pause_dead_endpoint(&endpoint.id, &reason, now)
                .await?
            {
                tracing::warn!(endpoint = %endpoint.id, reason = %reason, "endpoint paused");
                let subject = format!("Endpoint paused: {}", endpoint.url);
                let body = format!(
                    "We paused deliveries to {} because {reason}. New events keep queueing; \
                     resume the endpoint once the receiver is fixed and the queue drains.",
                    endpoint.url
                );
                self.store
                    .add_notification(
                        &endpoint.account_id,
                        Some(&endpoint.id),
                        "endpoint_paused",
                        &subject,
                        &body,
                        now,
                    )
                    .await?;
            }
        }
        Ok(())
    }
}
