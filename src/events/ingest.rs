//! Ingest (SPEC §3): the event and one pending delivery per subscribed
//! endpoint in one transaction (shared with the events that arrive with
//! it: `store::Ingester`), idempotent on the producer's id, and the
//! workers woken.

use opentelemetry::trace::SpanKind;

use crate::{
    clock::Timestamp,
    context::Ctx,
    error::{Error, Result},
    store::{Delivery, NewEvent, NewIngest, StoreError},
    telemetry::Span,
};

/// What an ingest left behind.
#[derive(Debug)]
pub struct Ingested {
    pub deliveries: Vec<Delivery>,
    /// `false` when the id was seen before: nothing new was stored, and
    /// `deliveries` are the first ingest's.
    pub created: bool,
}

/// Stores `new` for every endpoint that wants its type, or for `only` that
/// one endpoint whatever its filter (the dashboard's test event). `trace`
/// is the producer's `traceparent`, if it sent one. `key_id` is the
/// producer's API key when nothing checked it is active since
/// `accounts::producer` took it from the cache: the write does.
pub async fn ingest(
    ctx: &Ctx,
    new: NewEvent,
    only: Option<&str>,
    trace: Option<&str>,
    key_id: Option<&str>,
) -> Result<Ingested> {
    let mut span = ctx.telemetry.start("ingest", SpanKind::Server, trace, None);
    if let Some(span) = span.as_mut() {
        span.set("dakghar.event_id", new.id.clone());
        span.set("dakghar.account_id", new.account_id.clone());
        span.set("dakghar.event_type", new.event_type.clone());
    }
    let traceparent = span.as_ref().map(Span::traceparent);
    let ingested = store(ctx, new, only, traceparent, key_id).await;
    if let Some(mut span) = span {
        match &ingested {
            Ok(i) => {
                span.set("dakghar.deliveries", i.deliveries.len() as i64);
                span.set("dakghar.duplicate", !i.created);
            }
            Err(e) => span.fail(e.code()),
        }
        span.end();
    }
    ingested
}

async fn store(
    ctx: &Ctx,
    new: NewEvent,
    only: Option<&str>,
    traceparent: Option<String>,
    key_id: Option<&str>,
) -> Result<Ingested> {
    let now = ctx.clock.now();
    if let Err(wait_ms) = ctx.ingest_rate.spend(&new.account_id, now) {
        return Err(Error::RateLimited {
            message: format!(
                "this account may send {} events per second to this server; try again in a moment",
                ctx.config.ingest_rate_limit.unwrap_or(0)
            ),
            retry_after_s: wait_ms.div_ceil(1000).max(1),
        });
    }
    let give_up_at = now.plus(ctx.engine.settings().retry_window);
    let (account_id, id) = (new.account_id.clone(), new.id.clone());
    let (event_type, payload) = (new.event_type.clone(), new.payload.clone());
    let new = NewIngest {
        event: new,
        only: only.map(str::to_owned),
        now,
        give_up_at,
        traceparent,
        key_id: key_id.map(str::to_owned),
    };
    let inserted =
        crate::metrics::timed("dakghar_db_ingest_seconds", ctx.ingester.insert(new)).await;
    match inserted {
        Ok(inserted) => {
            // Unless its group's lease left nothing due that could start
            // now: a lease may take older work before the group's own
            // (the oldest due first), and work that waits for a loop that
            // backed off after a fault is retried at each ingest, as
            // before the leases. A woken loop that finds nothing still
            // costs two reads and their round trips.
            if !inserted.nothing_left_due {
                ctx.engine.wake().await;
            }
            Ok(Ingested {
                deliveries: inserted.deliveries,
                created: true,
            })
        }
        // The same id again: the first result, nothing new, as long as it
        // is the same event. Another event under a used id would otherwise
        // be dropped without a word.
        Err(StoreError::Conflict(_)) => {
            let first = ctx.store.event(&account_id, &id).await?;
            if first.event_type != event_type || !same_payload(&first.payload, &payload) {
                return Err(Error::ConflictCode {
                    code: "idempotency_conflict",
                    message: format!(
                        "event {id} was first sent at {} with type {:?} and another payload; \
                         this one was not stored: send it under a new id",
                        Timestamp(first.created_at).to_rfc3339(),
                        first.event_type,
                    ),
                });
            }
            Ok(Ingested {
                deliveries: ctx.store.deliveries_of_event(&account_id, &id).await?,
                created: false,
            })
        }
        Err(StoreError::KeyRevoked) => {
            if let Some(key_id) = key_id {
                ctx.keys.forget(key_id);
            }
            Err(crate::accounts::revoked())
        }
        Err(e) => Err(e.into()),
    }
}

/// The same bytes, or the same JSON written another way (key order,
/// spacing): a producer that re-serializes on retry sends the same event.
fn same_payload(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    let parse = |bytes| serde_json::from_slice::<serde_json::Value>(bytes).ok();
    matches!((parse(a), parse(b)), (Some(x), Some(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use super::same_payload;

    #[test]
    fn payloads_compare_as_json() {
        let cases: [(&str, &str, bool); 5] = [
            (r#"{"a":1}"#, r#"{"a":1}"#, true),
            (r#"{"a":1,"b":2}"#, r#"{ "b": 2, "a": 1 }"#, true),
            (r#"{"a":1}"#, r#"{"a":2}"#, false),
            (r#"{"a":1}"#, r#"{"a":"1"}"#, false),
            (r#"[1,2]"#, r#"[2,1]"#, false),
        ];
        for (a, b, same) in cases {
            assert_eq!(same_payload(a.as_bytes(), b.as_bytes()), same, "{a} vs {b}");
        }
    }
}
