//! Trace spans over OTLP/HTTP (`--otlp-endpoint`): a collector on
//! 127.0.0.1 receives one event's spans, ingest → claim → attempt, as one
//! trace under the producer's `traceparent`, with ids and outcomes and
//! nothing secret.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{body::Bytes, extract::State, routing::post, Router};
use dakghar::{clock::Clock, config::ServeConfig, store::Store};
use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::{any_value::Value as AnyValue, KeyValue},
    trace::v1::Span,
};
use prost::Message;
use serde_json::json;

use crate::{api_client::Api, receiver::Receiver};

on_both_backends!(one_event_is_one_trace_from_the_producers_parent_to_every_attempt);

/// What the collector was sent, span by span.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Collector {
    async fn start(&self) -> String {
        let app = Router::new()
            .route("/v1/traces", post(collect))
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    fn named(&self, name: &str) -> Vec<Span> {
        let spans = self.spans.lock().unwrap();
        spans.iter().filter(|s| s.name == name).cloned().collect()
    }
}

async fn collect(State(c): State<Collector>, body: Bytes) -> Vec<u8> {
    let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
    let mut spans = c.spans.lock().unwrap();
    for resource in request.resource_spans {
        for scope in resource.scope_spans {
            spans.extend(scope.spans);
        }
    }
    // An empty ExportTraceServiceResponse.
    Vec::new()
}

fn attr(span: &Span, key: &str) -> Option<String> {
    let found: &KeyValue = span.attributes.iter().find(|kv| kv.key == key)?;
    match found.value.as_ref()?.value.as_ref()? {
        AnyValue::StringValue(s) => Some(s.clone()),
        AnyValue::IntValue(i) => Some(i.to_string()),
        AnyValue::BoolValue(b) => Some(b.to_string()),
        other => Some(format!("{other:?}")),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn one_event_is_one_trace_from_the_producers_parent_to_every_attempt(store: Store) {
    let collector = Collector::default();
    let mut config = ServeConfig::for_tests();
    config.otlp_endpoint = Some(collector.start().await.parse().unwrap());
    let api = Api::with_config(store, config).await;
    let rx = Receiver::start().await;
    let endpoint = api.endpoint(&rx).await;
    rx.script(&[500]);

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let producer_span = "00f067aa0ba902b7";
    let res = api
        .http
        .post(api.app.url("/api/v1/events"))
        .bearer_auth(&api.key)
        .header("traceparent", format!("00-{trace_id}-{producer_span}-01"))
        .json(&json!({ "id": "evt_traced", "type": "invoice.paid", "payload": {"card": "4242 secret"} }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    assert_eq!(api.tick().await, 1, "the first attempt: 500");
    let detail = api.detail("evt_traced").await;
    let delivery = detail["deliveries"][0]["id"].as_str().unwrap();
    let next = api
        .app
        .store
        .delivery(delivery)
        .await
        .unwrap()
        .next_attempt_at;
    api.advance(Duration::from_millis(
        (next - api.app.clock.now().millis()).max(0) as u64,
    ));
    assert_eq!(api.tick().await, 1, "the second attempt: 200");

    let deadline = Instant::now() + Duration::from_secs(20);
    while collector.named("attempt").len() < 2 {
        api.app.engine.telemetry().flush().await;
        assert!(
            Instant::now() < deadline,
            "the collector never got both attempts"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let ingest = collector.named("ingest");
    let claims = collector.named("claim");
    let attempts = collector.named("attempt");
    assert_eq!((ingest.len(), claims.len(), attempts.len()), (1, 2, 2));
    let all: Vec<&Span> = ingest.iter().chain(&claims).chain(&attempts).collect();
    for span in &all {
        assert_eq!(
            hex(&span.trace_id),
            trace_id,
            "{} is in the producer's trace",
            span.name
        );
        assert_eq!(
            attr(span, "dakghar.event_id").as_deref(),
            Some("evt_traced")
        );
        assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
    }
    let ingest = &ingest[0];
    assert_eq!(hex(&ingest.parent_span_id), producer_span);
    assert_eq!(attr(ingest, "dakghar.deliveries").as_deref(), Some("1"));
    for claim in &claims {
        assert_eq!(
            claim.parent_span_id, ingest.span_id,
            "a claim under the ingest"
        );
        assert_eq!(
            attr(claim, "dakghar.endpoint_id"),
            endpoint["id"].as_str().map(String::from)
        );
    }
    let mut attempts = attempts.clone();
    attempts.sort_by_key(|s| attr(s, "dakghar.attempt"));
    for attempt in &attempts {
        assert!(
            claims.iter().any(|c| c.span_id == attempt.parent_span_id),
            "each attempt under its claim"
        );
    }
    let answered: Vec<_> = attempts
        .iter()
        .map(|s| {
            (
                attr(s, "dakghar.attempt").unwrap(),
                attr(s, "http.response.status_code").unwrap(),
                attr(s, "dakghar.delivery_state").unwrap(),
            )
        })
        .collect();
    assert_eq!(
        answered,
        [
            ("1".into(), "500".into(), "retrying".into()),
            ("2".into(), "200".into(), "delivered".into())
        ]
    );
    // Ids and outcomes only: no payload, no receiver URL, no secret.
    let secret = endpoint["secret"].as_str().unwrap_or("whsec_");
    for span in &all {
        for kv in &span.attributes {
            let shown = format!("{:?}", kv.value);
            for leak in ["secret", "4242", rx.url.as_str(), secret] {
                assert!(
                    !shown.contains(leak),
                    "{} carries {leak}: {shown}",
                    span.name
                );
            }
        }
    }
}
