//! One attempt of one claimed delivery: the checks before sending (its
//! deadline, its endpoint's state, circuit and throttle; the rate limit
//! was spent by the claim), the signed
//! request, and what the answer leaves behind: the attempt recorded with
//! the delivery's next state, the log line, the metrics, endpoint health.

use std::borrow::Cow;

use opentelemetry::trace::SpanKind;

use super::{
    backoff::Strategy,
    classify::{classify_with, Verdict},
    decision::{decide, Answer},
    endpoint_health::AttemptSeen,
    engine::LOG_TARGET,
    error::DeliveryError,
    request::{self, Outgoing, Sent},
    retry_statuses::RetryStatuses,
    settings::DeliverySettings,
    signing, throttle, Engine,
};
use crate::{
    clock::Timestamp,
    store::{
        AttemptRecord, CircuitState, Completion, Delivery, Endpoint, EndpointState, Event,
        Transition,
    },
    telemetry::Span,
};

impl Engine {
    pub(super) async fn attempt(
        &self,
        delivery: &Delivery,
        endpoint: &Endpoint,
        event: &Event,
        trace: Option<&str>,
    ) -> Result<(), DeliveryError> {
        let now = self.clock.now();
        let store = &self.store;
        if now.millis() >= delivery.give_up_at {
            store
                .expire_claimed(delivery, "retry window passed before the next attempt", now)
                .await?;
            tracing::info!(target: LOG_TARGET, delivery = %delivery.id, outcome = "expired", "delivery expired: retry window passed");
            metrics::counter!("dakghar_dead_lettered_total", "reason" => "expired").increment(1);
            return Ok(());
        }
        if endpoint.state != EndpointState::Active {
            return Ok(store.release_claim(delivery, now).await?);
        }
        if endpoint.circuit_state == CircuitState::Open
            && !store.try_half_open(&endpoint.id, now).await?
        {
            // Another worker holds the single half-open trial.
            return Ok(store.release_claim(delivery, now).await?);
        }
        // Claimed before the throttle began, or its place in the window
        // after it has not come yet: back, with no attempt counted.
        if let Some(at) = throttle::release_at(endpoint, &delivery.id, now) {
            return Ok(store.postpone_claim(delivery, at, now).await?);
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
            secrets: signing::secrets_of(endpoint, now),
            now,
        };
        let mut span = self
            .telemetry
            .start("attempt", SpanKind::Client, trace, None);
        if let Some(span) = span.as_mut() {
            span.set("dakghar.event_id", delivery.event_id.clone());
            span.set("dakghar.delivery_id", delivery.id.clone());
            span.set("dakghar.endpoint_id", endpoint.id.clone());
            span.set("dakghar.attempt", delivery.attempt_seq + 1);
        }
        let sent = match request::send(&self.client, out, &self.settings).await {
            Ok(sent) => sent,
            Err(e) => {
                if let Some(mut span) = span {
                    span.fail("not sent: a fault of ours");
                    span.end();
                }
                return Err(e.into());
            }
        };
        self.record(delivery, endpoint, sent, now, span).await
    }

    async fn record(
        &self,
        delivery: &Delivery,
        endpoint: &Endpoint,
        sent: Sent,
        started: Timestamp,
        span: Option<Span>,
    ) -> Result<(), DeliveryError> {
        let now = self.clock.now();
        let policy = self.policy_of(endpoint);
        let verdict = if sent.blocked {
            Verdict::Blocked
        } else if sent.incomplete {
            // Headers alone are no answer: the total timeout (or a reset)
            // cut the body off, so the attempt is retried like any timeout.
            Verdict::Retry
        } else {
            classify_with(sent.status, &policy.retry_statuses)
        };
        let answer = Answer {
            verdict,
            status: sent.status,
            retry_after: sent.retry_after.as_deref(),
        };
        let decision = decide(
            answer,
            delivery.attempts,
            Timestamp(delivery.give_up_at),
            &policy,
            now,
            &mut rand::thread_rng(),
        );
        let transition = decision.transition;
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
            error: decision.reason.or_else(|| sent.error.clone()),
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
        let status = sent
            .status
            .map_or_else(|| "none".to_string(), |s| s.to_string());
        let next_attempt_at = match transition {
            Transition::Retry { next_attempt_at } => next_attempt_at.to_rfc3339(),
            _ => "none".to_string(),
        };
        // The receiver's own words on when to come back, as it sent them.
        let retry_after = sent.retry_after.as_deref().unwrap_or("none");
        tracing::info!(target: LOG_TARGET,
            delivery = %delivery.id,
            endpoint = %endpoint.id,
            method = %"POST",
            host = %sent.host,
            attempt,
            status = %status,
            duration_ms,
            outcome = %verdict.as_str(),
            retry_after = %retry_after.escape_debug(),
            next_attempt_at = %next_attempt_at,
            "attempt"
        );
        let final_state = match transition {
            Transition::Retry { .. } => None,
            Transition::Delivered => Some("delivered"),
            Transition::Failed => Some("failed"),
            Transition::Expired => Some("expired"),
        };
        if let Some(mut span) = span {
            if let Some(status) = sent.status {
                span.set("http.response.status_code", i64::from(status));
            }
            span.set("dakghar.classification", verdict.as_str());
            span.set("dakghar.delivery_state", final_state.unwrap_or("retrying"));
            if transition != Transition::Delivered {
                span.fail(verdict.as_str());
            }
            span.end();
        }
        // A delivery that ends delivered already said so in its attempt's
        // line: a second line for it doubled the log and its formatting
        // on every delivery. One that ends otherwise is news.
        match final_state {
            Some(state @ "delivered") => {
                tracing::debug!(target: LOG_TARGET, delivery = %delivery.id, endpoint = %endpoint.id, state, "delivery finished")
            }
            Some(state) => {
                tracing::info!(target: LOG_TARGET, delivery = %delivery.id, endpoint = %endpoint.id, state, "delivery finished")
            }
            None => {}
        }
        record_metrics(delivery, &sent, verdict, transition, started);
        let seen = AttemptSeen {
            verdict,
            transition,
            status: sent.status,
            retry_after: sent.retry_after.as_deref(),
            timed_out: sent.timed_out,
            started,
        };
        self.update_endpoint_health(endpoint, seen, now).await
    }
}

impl Engine {
    /// The settings with the endpoint's own retry policy, if it has one.
    fn policy_of(&self, endpoint: &Endpoint) -> Cow<'_, DeliverySettings> {
        let strategy = endpoint.retry_strategy.as_deref().and_then(Strategy::parse);
        let statuses = endpoint
            .retry_statuses
            .as_deref()
            .and_then(|raw| raw.parse::<RetryStatuses>().ok());
        if strategy.is_none() && statuses.is_none() {
            return Cow::Borrowed(&self.settings);
        }
        let mut own = self.settings.clone();
        if let Some(strategy) = strategy {
            own.backoff.strategy = strategy;
        }
        if let Some(statuses) = statuses {
            own.retry_statuses = statuses;
        }
        Cow::Owned(own)
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
