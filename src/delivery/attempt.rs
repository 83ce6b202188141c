//! One attempt of one claimed delivery: the checks before sending (its
//! deadline, its endpoint's state and circuit, the rate limit), the signed
//! request, and what the answer leaves behind: the attempt recorded with
//! the delivery's next state, the log line and the metrics.

use std::time::Duration;

use super::{
    classify::{classify, Verdict},
    engine::Engine,
    request::{self, Outgoing, Sent},
    retry_after,
};
use crate::{
    clock::Timestamp,
    store::{
        AttemptRecord, CircuitState, Completion, Delivery, Endpoint, EndpointState, Event,
        StoreError, Transition,
    },
};

impl Engine {
    pub(super) async fn attempt(
        &self,
        delivery: &Delivery,
        endpoint: &Endpoint,
        event: &Event,
    ) -> Result<(), StoreError> {
        let now = self.clock.now();
        if now.millis() >= delivery.give_up_at {
            self.store
                .expire_claimed(delivery, "retry window passed before the next attempt", now)
                .await?;
            tracing::info!(delivery = %delivery.id, outcome = "expired", "delivery expired: retry window passed");
            metrics::counter!("dakghar_dead_lettered_total", "reason" => "expired").increment(1);
            return Ok(());
        }
        if endpoint.state != EndpointState::Active {
            return self.store.release_claim(delivery, now).await;
        }
        if endpoint.circuit_state == CircuitState::Open
            && !self.store.try_half_open(&endpoint.id, now).await?
        {
            // Another worker holds the single half-open trial.
            return self.store.release_claim(delivery, now).await;
        }
        if let Some(free_at) = self.over_rate_limit(endpoint, now).await? {
            return self.store.postpone_claim(delivery, free_at, now).await;
        }
        let mut secrets = vec![endpoint.secret.as_str()];
        if let (Some(old), Some(until)) = (
            &endpoint.previous_secret,
            endpoint.previous_secret_expires_at,
        ) {
            if until > now.millis() {
                secrets.push(old.as_str());
            }
        }
        let hook = self
            .fault_hook
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(hook) = hook {
            hook(delivery);
        }
        let out = Outgoing {
            url: &endpoint.url,
            event_id: &event.id,
            body: &event.payload,
            secrets,
            now,
        };
        let sent = request::send(&self.client, out, &self.settings)
            .await
            .map_err(|e| StoreError::Config(e.to_string()))?;
        self.record(delivery, endpoint, sent, now).await
    }

    async fn record(
        &self,
        delivery: &Delivery,
        endpoint: &Endpoint,
        sent: Sent,
        started: Timestamp,
    ) -> Result<(), StoreError> {
        let now = self.clock.now();
        let verdict = if sent.blocked {
            Verdict::Blocked
        } else if sent.incomplete {
            // Headers alone are no answer: the total timeout (or a reset)
            // cut the body off, so the attempt is retried like any timeout.
            Verdict::Retry
        } else {
            classify(sent.status)
        };
        let failed_count = u32::try_from(delivery.attempts + 1).unwrap_or(u32::MAX);
        let mut reason = sent.error.clone();
        let transition = match verdict {
            Verdict::Delivered => Transition::Delivered,
            Verdict::Failed | Verdict::Gone | Verdict::Blocked => Transition::Failed,
            Verdict::Retry | Verdict::RetryAmbiguous => {
                self.retry_or_expire(delivery, &sent, failed_count, now, &mut reason)
            }
        };
        let record = AttemptRecord {
            attempt: delivery.attempt_seq + 1,
            started_at: started.millis(),
            duration_ms: i64::try_from(sent.duration.as_millis()).unwrap_or(i64::MAX),
            request_headers: serde_json::to_string(&sent.request_headers).unwrap_or_default(),
            response_status: sent.status.map(i64::from),
            response_headers: Some(
                serde_json::to_string(&sent.response_headers).unwrap_or_default(),
            ),
            response_body: sent.status.map(|_| sent.body.clone()),
            error: reason,
            classification: verdict.as_str().to_string(),
        };
        let attempt = record.attempt;
        let duration_ms = record.duration_ms;
        self.recorder
            .complete(Completion {
                claimed: delivery.clone(),
                record,
                transition,
                now,
            })
            .await?;
        let host = url::Url::parse(&endpoint.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        let status = sent
            .status
            .map_or_else(|| "none".to_string(), |s| s.to_string());
        tracing::info!(
            delivery = %delivery.id,
            endpoint = %endpoint.id,
            host = %host,
            attempt,
            status = %status,
            duration_ms,
            outcome = %verdict.as_str(),
            "attempt"
        );
        let final_state = match transition {
            Transition::Retry { .. } => None,
            Transition::Delivered => Some("delivered"),
            Transition::Failed => Some("failed"),
            Transition::Expired => Some("expired"),
        };
        if let Some(state) = final_state {
            tracing::info!(delivery = %delivery.id, endpoint = %endpoint.id, state, "delivery finished");
        }
        record_metrics(delivery, &sent, verdict, transition, started);
        self.update_endpoint_health(endpoint, verdict, transition, now)
            .await
    }

    fn retry_or_expire(
        &self,
        delivery: &Delivery,
        sent: &Sent,
        failed_count: u32,
        now: Timestamp,
        reason: &mut Option<String>,
    ) -> Transition {
        if failed_count >= self.settings.max_attempts {
            *reason = Some(format!("gave up after {failed_count} attempts"));
            return Transition::Expired;
        }
        let backoff = self
            .settings
            .backoff
            .delay(failed_count, &mut rand::thread_rng());
        let asked = match sent.status {
            Some(429 | 503) => sent
                .retry_after
                .as_deref()
                .and_then(|v| retry_after::parse(v, now)),
            _ => None,
        };
        let delay = asked.map_or(backoff, |a| a.max(backoff));
        let next = now.plus(delay);
        if next.millis() >= delivery.give_up_at {
            *reason = Some(match asked {
                Some(a) if a >= backoff => format!(
                    "the receiver asked to wait {}s (Retry-After), past the retry window",
                    a.as_secs()
                ),
                _ => "the next attempt would fall past the retry window".to_string(),
            });
            return Transition::Expired;
        }
        Transition::Retry {
            next_attempt_at: next,
        }
    }

    /// Returns when the next start frees up if this one would exceed the
    /// endpoint's `rate_limit_per_sec`; retries spend the same budget.
    async fn over_rate_limit(
        &self,
        endpoint: &Endpoint,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, StoreError> {
        let Some(limit) = endpoint.rate_limit_per_sec.filter(|l| *l > 0) else {
            return Ok(None);
        };
        self.store
            .take_rate_slot(
                &format!("start:{}", endpoint.id),
                Duration::from_secs(1),
                limit,
                now,
            )
            .await
    }
}

fn record_metrics(
    delivery: &Delivery,
    sent: &Sent,
    verdict: Verdict,
    transition: Transition,
    started: Timestamp,
) {
    let seconds = |ms: i64| ms.max(0) as f64 / 1000.0;
    metrics::counter!(
        "dakghar_attempts_total",
        "outcome" => verdict.as_str(),
        "status_class" => crate::metrics::status_class(sent.status)
    )
    .increment(1);
    metrics::histogram!("dakghar_request_seconds").record(sent.duration.as_secs_f64());
    metrics::histogram!("dakghar_attempt_delay_seconds")
        .record(seconds(started.millis() - delivery.next_attempt_at));
    match transition {
        Transition::Retry { .. } => metrics::counter!("dakghar_retries_total").increment(1),
        Transition::Delivered => {
            if delivery.attempts > 0 {
                metrics::counter!("dakghar_delivered_after_retry_total").increment(1);
            }
            metrics::histogram!("dakghar_delivery_delay_seconds")
                .record(seconds(started.millis() - delivery.created_at));
        }
        Transition::Failed => {
            metrics::counter!("dakghar_dead_lettered_total", "reason" => "failed").increment(1)
        }
        Transition::Expired => {
            metrics::counter!("dakghar_dead_lettered_total", "reason" => "expired").increment(1)
        }
    }
}
