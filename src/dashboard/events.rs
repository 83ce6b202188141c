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

use super::internal;
use crate::{
    clock::Timestamp,
    context::Ctx,
    delivery::classify::explain,
    replay::{self as resend, ResendError},
    store::{Attempt, Delivery, DeliveryState, Endpoint, EventFilter},
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
            c.split_once('.')
                .and_then(|(at, id)| Some((at.parse().ok()?, id.to_string())))
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
    let page = ctx
        .store
        .list_events(&viewer.account_id, &filter, PAGE_SIZE)
        .await
        .map_err(internal)?;
    let endpoints = ctx
        .store
        .list_endpoints(&viewer.account_id)
        .await
        .map_err(internal)?;
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
        next_cursor: page.next.map(|(at, id)| format!("{at}.{id}")),
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
    let store = &ctx.store;
    let event = store
        .event(&viewer.account_id, id)
        .await
        .map_err(internal)?;
    let endpoints = store
        .list_endpoints(&viewer.account_id)
        .await
        .map_err(internal)?;
    let urls = urls_by_id(&endpoints);
    let mut deliveries = Vec::new();
    for d in store
        .deliveries_of_event(&viewer.account_id, id)
        .await
        .map_err(internal)?
    {
        let url = url_of(&urls, &d.endpoint_id);
        let mut attempts = store.attempts_of_delivery(&d.id).await.map_err(internal)?;
        attempts.sort_by_key(|a| std::cmp::Reverse(a.attempt));
        let status = status_of(&d);
        deliveries.push(DeliveryDetail {
            next_attempt_at: d.next_attempt(),
            attempts: attempts
                .into_iter()
                .map(|a| attempt_view(a, &url, &event.id, &event.payload))
                .collect(),
            id: d.id,
            endpoint_id: d.endpoint_id,
            endpoint_url: url,
            status,
            give_up_at: d.give_up_at,
            finished_at: d.finished_at,
            last_error: d.last_error,
        });
    }
    Ok(EventDetail {
        now: ctx.clock.now().millis(),
        payload_pretty: pretty(&event.payload),
        id: event.id,
        event_type: event.event_type,
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

fn attempt_view(a: Attempt, url: &str, event_id: &str, payload: &[u8]) -> AttemptView {
    let status = a.response_status.and_then(|s| u16::try_from(s).ok());
    AttemptView {
        number: a.attempt,
        started_at: a.started_at,
        duration_ms: a.duration_ms,
        status: a.response_status,
        explanation: explain(status, &a.classification),
        request_headers: headers(Some(&a.request_headers)),
        response_headers: headers(a.response_headers.as_deref()),
        response_snippet: a
            .response_body
            .map(|b| String::from_utf8_lossy(&b).into_owned()),
        error: a.error,
        curl: curl(url, event_id, payload),
    }
}

fn headers(stored: Option<&str>) -> Vec<(String, String)> {
    stored
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
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
    let actor = format!("user:{}", viewer.user_id);
    match resend::resend(ctx, &viewer.account_id, delivery_id, &actor).await {
        Ok(_) => Ok(()),
        Err(ResendError::NotFound) => Err(AppError::NotFound),
        Err(e @ ResendError::NotFinished) => Err(AppError::Conflict(e.to_string())),
        Err(ResendError::RateLimited { retry_after_s, .. }) => {
            Err(AppError::RateLimited { retry_after_s })
        }
        Err(ResendError::Store(e)) => Err(internal(e)),
    }
}
