//! The events pages' data: the filtered list, one event in full, resend.

use std::collections::HashMap;

use app::{
    error::AppError,
    model::{
        events::{
            AttemptView, DeliveryBadge, DeliveryDetail, EndpointOption, EventDetail, EventRow,
            EventsList, EventsQuery, Status,
        },
        Viewer,
    },
};

use crate::{
    clock::Timestamp,
    context::Ctx,
    endpoints,
    events::{self, AttemptInfo},
    replay,
    store::{Delivery, DeliveryState, Endpoint, EndpointState, EventFilter},
};

const PAGE_SIZE: i64 = 25;

pub async fn list(ctx: &Ctx, viewer: &Viewer, q: EventsQuery) -> Result<EventsList, AppError> {
    let now = ctx.clock.now();
    let state = match q.state {
        Some(s) if DeliveryState::parse(&s).is_none() => {
            return Err(AppError::Invalid(format!("unknown delivery state {s:?}")))
        }
        s => s,
    };
    let since = match q.range.as_deref() {
        None => None,
        Some(r) => Some(Timestamp(now.millis() - range_ms(r)?)),
    };
    let after = q
        .cursor
        .as_deref()
        .map(|c| {
            events::parse_cursor(c)
                .ok_or_else(|| AppError::Invalid("that page link is not valid".into()))
        })
        .transpose()?;
    let filter = EventFilter {
        state,
        event_type: q.event_type,
        endpoint_id: q.endpoint,
        since,
        until: None,
        after,
        id: q.id,
    };
    let page = events::list(ctx, &viewer.account_id, &filter, PAGE_SIZE).await?;
    let endpoints = endpoints::list(ctx, &viewer.account_id).await?;
    let urls = urls_by_id(&endpoints);
    let rows = page
        .events
        .into_iter()
        .map(|(e, deliveries)| EventRow {
            deliveries: deliveries
                .iter()
                .map(|d| DeliveryBadge {
                    endpoint_url: url_of(&urls, &d.endpoint_id),
                    status: status_of(d),
                })
                .collect(),
            id: e.id,
            event_type: e.event_type,
            created_at: e.created_at,
        })
        .collect();
    Ok(EventsList {
        rows,
        next_cursor: page.next.as_ref().map(events::cursor),
        endpoints: endpoints
            .iter()
            .map(|e| EndpointOption {
                id: e.id.clone(),
                url: e.url.clone(),
            })
            .collect(),
    })
}

fn range_ms(range: &str) -> Result<i64, AppError> {
    let hours = match range {
        "1h" => 1,
        "24h" => 24,
        "7d" => 7 * 24,
        "30d" => 30 * 24,
        other => return Err(AppError::Invalid(format!("unknown time range {other:?}"))),
    };
    Ok(hours * 3_600_000)
}

fn urls_by_id(endpoints: &[Endpoint]) -> HashMap<&str, &str> {
    endpoints
        .iter()
        .map(|e| (e.id.as_str(), e.url.as_str()))
        .collect()
}

fn url_of(urls: &HashMap<&str, &str>, endpoint_id: &str) -> String {
    urls.get(endpoint_id)
        .map_or_else(|| "(deleted endpoint)".to_string(), |u| (*u).to_string())
}

fn status_of(d: &Delivery) -> Status {
    Status::from_state(d.state.as_str(), d.attempts)
}

pub async fn detail(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<EventDetail, AppError> {
    let detail = events::detail(ctx, &viewer.account_id, id).await?;
    let endpoints = endpoints::list(ctx, &viewer.account_id).await?;
    let urls = urls_by_id(&endpoints);
    let event = &detail.event;
    let deliveries = detail
        .deliveries
        .into_iter()
        .map(|info| {
            let d = info.delivery;
            let url = url_of(&urls, &d.endpoint_id);
            // Newest first.
            let attempts = info
                .attempts
                .into_iter()
                .rev()
                .map(|a| attempt_view(a, &url, &event.id, &event.payload))
                .collect();
            let endpoint_paused = endpoints
                .iter()
                .any(|e| e.id == d.endpoint_id && e.state == EndpointState::Paused);
            DeliveryDetail {
                endpoint_paused,
                next_attempt_at: d.next_attempt(),
                status: status_of(&d),
                attempts,
                id: d.id,
                endpoint_id: d.endpoint_id,
                endpoint_url: url,
                give_up_at: d.give_up_at,
                finished_at: d.finished_at,
                last_error: d.last_error,
            }
        })
        .collect();
    Ok(EventDetail {
        now: ctx.clock.now().millis(),
        payload_pretty: pretty(&event.payload),
        id: event.id.clone(),
        event_type: event.event_type.clone(),
        created_at: event.created_at,
        deliveries,
    })
}

fn pretty(payload: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(payload)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| String::from_utf8_lossy(payload).into_owned())
}

fn attempt_view(a: AttemptInfo, url: &str, event_id: &str, payload: &[u8]) -> AttemptView {
    AttemptView {
        number: a.number,
        started_at: a.started_at,
        duration_ms: a.duration_ms,
        status: a.status,
        explanation: a.explanation,
        request_headers: a.request_headers,
        response_headers: a.response_headers,
        response_snippet: a.response_snippet,
        error: a.error,
        curl: curl(url, event_id, payload),
    }
}

/// The request again as a shell command. The signature is a placeholder
/// with the recipe to compute it: the page never shows the secret.
pub fn curl(url: &str, event_id: &str, payload: &[u8]) -> String {
    let body = String::from_utf8_lossy(payload);
    format!(
        "# Sign with your endpoint secret (whsec_…): SIGNATURE=\"v1,$(base64 of HMAC-SHA256 over \"{id}.$TS.<body>\")\"\n\
         TS=$(date +%s)\n\
         curl -X POST {url} \\\n  \
         -H 'content-type: application/json' \\\n  \
         -H {id_header} \\\n  \
         -H \"webhook-timestamp: $TS\" \\\n  \
         -H \"webhook-signature: $SIGNATURE\" \\\n  \
         --data-raw {body}",
        id = event_id,
        url = shell_quote(url),
        id_header = shell_quote(&format!("webhook-id: {event_id}")),
        body = shell_quote(&body),
    )
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

pub async fn resend(ctx: &Ctx, viewer: &Viewer, delivery_id: &str) -> Result<(), AppError> {
    replay::resend(ctx, &viewer.account_id, delivery_id, &viewer.actor).await?;
    Ok(())
}
