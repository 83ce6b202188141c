//! OpenTelemetry traces (`--otlp-endpoint`): one trace per event, from the
//! ingest request through each claim to every attempt, exported over
//! OTLP/HTTP. The event keeps its ingest span's `traceparent`, so spans
//! made later, on any node, join the same trace; a `traceparent` the
//! producer sent becomes the ingest span's parent. Spans carry ids,
//! numbers and outcomes, never secrets, URLs or payloads.
//!
//! Off (the default), `Telemetry` holds nothing and every call returns at
//! once.

use std::{collections::HashMap, fmt, time::SystemTime};

use opentelemetry::{
    propagation::TextMapPropagator,
    trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _},
    Context, KeyValue,
};
use opentelemetry_sdk::{
    propagation::TraceContextPropagator,
    trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider},
    Resource,
};

mod exporter;

#[derive(Default)]
pub struct Telemetry {
    on: Option<On>,
}

struct On {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Telemetry")
            .field("on", &self.on.is_some())
            .finish()
    }
}

/// A span being recorded; ends when `end` is called (or when dropped).
pub struct Span(opentelemetry_sdk::trace::Span);

impl Telemetry {
    /// Exports to the OTLP/HTTP collector at `endpoint` (its base URL, or
    /// the full `/v1/traces` one). Must run inside the tokio runtime, which
    /// carries the exporter's requests.
    pub fn exporting_to(endpoint: &url::Url) -> Result<Telemetry, String> {
        let exporter = exporter::build(endpoint)?;
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_scheduled_delay(std::time::Duration::from_secs(2))
                    .build(),
            )
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(Resource::builder().with_service_name("dakghar").build())
            .build();
        let tracer = provider.tracer("dakghar");
        Ok(Telemetry {
            on: Some(On { provider, tracer }),
        })
    }

    pub fn is_on(&self) -> bool {
        self.on.is_some()
    }

    /// Starts `name` under `parent`, a W3C `traceparent` (none, or one that
    /// does not parse: a new trace).
    pub fn start(
        &self,
        name: &'static str,
        kind: SpanKind,
        parent: Option<&str>,
        at: Option<SystemTime>,
    ) -> Option<Span> {
        let on = self.on.as_ref()?;
        let parent = parent.map_or_else(Context::new, context_of);
        let mut builder = on.tracer.span_builder(name).with_kind(kind);
        if let Some(at) = at {
            builder = builder.with_start_time(at);
        }
        Some(Span(builder.start_with_context(&on.tracer, &parent)))
    }

    /// Sends what is buffered now. It waits for the runtime, so off it.
    pub async fn flush(self: &std::sync::Arc<Self>) {
        let this = std::sync::Arc::clone(self);
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(on) = &this.on {
                if let Err(e) = on.provider.force_flush() {
                    tracing::warn!(error = %e, "could not export trace spans");
                }
            }
        })
        .await;
    }

    /// Sends what is left and stops; blocks, so off the runtime's threads.
    pub fn shutdown(&self) {
        if let Some(on) = &self.on {
            let _ = on.provider.shutdown();
        }
    }
}

impl Span {
    pub fn set(&mut self, key: &'static str, value: impl Into<opentelemetry::Value>) {
        self.0.set_attribute(KeyValue::new(key, value));
    }

    pub fn fail(&mut self, why: impl Into<String>) {
        self.0.set_status(Status::error(why.into()));
    }

    /// This span as a `traceparent`, for what happens under it later.
    pub fn traceparent(&self) -> String {
        let cx = Context::new().with_remote_span_context(self.0.span_context().clone());
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(&cx, &mut carrier);
        carrier.remove("traceparent").unwrap_or_default()
    }

    pub fn end(mut self) {
        self.0.end();
    }
}

/// The collector's address for logs and `config check`: no user or password.
pub fn masked(endpoint: &url::Url) -> String {
    let mut shown = endpoint.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

fn context_of(traceparent: &str) -> Context {
    let carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    TraceContextPropagator::new().extract(&carrier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_round_trips_and_junk_starts_a_new_trace() {
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let cx = context_of(parent);
        let span = cx.span();
        let sc = span.span_context();
        assert!(sc.is_valid() && sc.is_remote() && sc.is_sampled());
        assert_eq!(
            format!("{:032x}", sc.trace_id()),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        for junk in [
            "",
            "00-xyz",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        ] {
            assert!(!context_of(junk).span().span_context().is_valid(), "{junk}");
        }
        let off = Telemetry::default();
        assert!(off
            .start("ingest", SpanKind::Server, Some(parent), None)
            .is_none());
    }
}
