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
    let endpoints = endpoints::list(ctx, &viewer.account_id).await?;
    let event_types = events::types(ctx, &viewer.account_id, 200).await?;
    let mut list = EventsList {
        now: now.millis(),
        rows: Vec::new(),
        next_cursor: None,
        prev_cursor: None,
        endpoints: endpoints
            .iter()
            .map(|e| EndpointOption {
                id: e.id.clone(),
                url: e.url.clone(),
            })
            .collect(),
        event_types,
        problem: None,
    };
    // Filters that cannot be read leave the form on the page with what was
    // typed, and say why, instead of replacing the page with an error.
    let filter = match filter_of(q, now) {
        Ok(f) => f,
        Err(problem) => {
            list.problem = Some(problem);
            return Ok(list);
        }
    };
    let page = events::list(ctx, &viewer.account_id, &filter, PAGE_SIZE).await?;
    let names = names_by_id(&endpoints);
    list.rows = page
        .events
        .into_iter()
        .map(|(e, deliveries)| EventRow {
            deliveries: deliveries
                .iter()
                .map(|d| {
                    let (endpoint_name, endpoint_url) = name_of(&names, &d.endpoint_id);
                    DeliveryBadge {
                        endpoint_name,
                        endpoint_url,
                        status: status_of(d),
                    }
                })
                .collect(),
            id: e.id,
            event_type: e.event_type,
            created_at: e.created_at,
        })
        .collect();
    list.next_cursor = page.next.as_ref().map(events::cursor);
    list.prev_cursor = page.prev.as_ref().map(events::cursor);
    Ok(list)
}

/// The store's filter for the page's query, or what is wrong with it.
fn filter_of(q: EventsQuery, now: Timestamp) -> Result<EventFilter, String> {
    if let Some(s) = &q.state {
        if DeliveryState::parse(s).is_none() {
            return Err(format!("unknown delivery state {s:?}"));
        }
    }
    let mut since = match q.range.as_deref() {
        None => None,
        Some(r) => Some(Timestamp(now.millis() - range_ms(r)?)),
    };
    let offset = match q.tz.as_deref() {
        None => 0,
        Some(t) => t
            .parse::<i64>()
            .ok()
            .filter(|o| o.abs() <= 18 * 60)
            .ok_or_else(|| format!("time zone offset {t:?} is not minutes east of UTC"))?,
    };
    let from = q
        .from
        .as_deref()
        .map(|v| wall_clock("From", v, offset, false))
        .transpose()?;
    let to =
        q.to.as_deref()
            .map(|v| wall_clock("To", v, offset, true))
            .transpose()?;
    if let (Some(f), Some(t)) = (from, to) {
        if t <= f {
            return Err("\"To\" must be later than \"From\"".into());
        }
    }
    since = since.max(from);
    let page_link =
        |c: &str| events::parse_cursor(c).ok_or_else(|| "that page link is not valid".to_string());
    let after = q.cursor.as_deref().map(page_link).transpose()?;
    let before = q.before.as_deref().map(page_link).transpose()?;
    Ok(EventFilter {
        state: q.state,
        event_type: q.event_type,
        endpoint_id: q.endpoint,
        since,
        until: to,
        after,
        before,
        id: q.id,
        answer: q.status.as_deref().map(events::parse_answer).transpose()?,
    })
}

/// A date (`2026-12-01`) or a date and time (`2026-12-01T14:30`, what a
/// datetime-local input sends) on the wall clock `offset` minutes east of
/// UTC. A bare date as the end of a range means the whole day.
fn wall_clock(name: &str, v: &str, offset: i64, end: bool) -> Result<Timestamp, String> {
    use chrono::{NaiveDate, NaiveDateTime};
    let at = if let Ok(day) = NaiveDate::parse_from_str(v, "%Y-%m-%d") {
        let day = if end {
            day.succ_opt().unwrap_or(day)
        } else {
            day
        };
        day.and_hms_opt(0, 0, 0).map(|t| t.and_utc())
    } else {
        ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
            .iter()
            .find_map(|f| NaiveDateTime::parse_from_str(v, f).ok())
            .map(|t| t.and_utc())
    };
    at.map(|t| Timestamp(t.timestamp_millis() - offset * 60_000))
        .ok_or_else(|| {
            format!("{name} {v:?} is not a date (2026-12-01) or a date and time (2026-12-01T14:30)")
        })
}

fn range_ms(range: &str) -> Result<i64, String> {
    let hours = match range {
        "1h" => 1,
        "24h" => 24,
        "7d" => 7 * 24,
        "30d" => 30 * 24,
        other => return Err(format!("unknown time range {other:?}")),
    };
    Ok(hours * 3_600_000)
}

/// Each endpoint's (name, URL) by id.
fn names_by_id(endpoints: &[Endpoint]) -> HashMap<&str, (String, &str)> {
    endpoints
        .iter()
        .map(|e| (e.id.as_str(), (endpoint_name(e), e.url.as_str())))
        .collect()
}

fn name_of(names: &HashMap<&str, (String, &str)>, endpoint_id: &str) -> (String, String) {
    names.get(endpoint_id).map_or_else(
        || ("(deleted endpoint)".to_string(), String::new()),
        |(name, url)| (name.clone(), (*url).to_string()),
    )
}

/// What a customer calls an endpoint: its description, else its host and
/// path (the scheme and query add nothing to tell them apart).
pub fn endpoint_name(e: &Endpoint) -> String {
    let description = e.description.trim();
    if !description.is_empty() {
        return description.to_string();
    }
    let rest = e.url.split_once("://").map_or(e.url.as_str(), |(_, r)| r);
    let without_query = rest.split(['?', '#']).next().unwrap_or(rest);
    without_query
        .strip_suffix('/')
        .unwrap_or(without_query)
        .to_string()
}

fn status_of(d: &Delivery) -> Status {
    Status::from_state(d.state.as_str(), d.attempts)
}

pub async fn detail(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<EventDetail, AppError> {
    let detail = events::detail(ctx, &viewer.account_id, id).await?;
    let endpoints = endpoints::list(ctx, &viewer.account_id).await?;
    let names = names_by_id(&endpoints);
    let event = &detail.event;
    let deliveries = detail
        .deliveries
        .into_iter()
        .map(|info| {
            let d = info.delivery;
            let (name, url) = name_of(&names, &d.endpoint_id);
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
                endpoint_name: name,
                endpoint_url: url,
                give_up_at: d.give_up_at,
                finished_at: d.finished_at,
                last_error: d.last_error,
            }
        })
        .collect();
    Ok(EventDetail {
        now: ctx.clock.now().millis(),
        payload: String::from_utf8_lossy(&event.payload).into_owned(),
        id: event.id.clone(),
        event_type: event.event_type.clone(),
        created_at: event.created_at,
        deliveries,
    })
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

/// The request again as a shell command for someone who holds the secret
/// (the page never shows it): paste the secret in and the script signs
/// the exact body now, as Dakghar does, with openssl.
pub fn curl(url: &str, event_id: &str, payload: &[u8]) -> String {
    let body = String::from_utf8_lossy(payload);
    format!(
        "SECRET='whsec_…'  # your endpoint's signing secret\n\
         TS=$(date +%s)\n\
         BODY={body}\n\
         KEY=$(printf '%s' \"${{SECRET#whsec_}}\" | base64 -d | od -An -tx1 | tr -d ' \\n')\n\
         SIGNATURE=\"v1,$(printf '%s' {id_dot}\"$TS.$BODY\" | openssl dgst -sha256 -mac HMAC -macopt hexkey:$KEY -binary | base64)\"\n\
         curl -X POST {url} \\\n  \
         -H 'content-type: application/json' \\\n  \
         -H {id_header} \\\n  \
         -H \"webhook-timestamp: $TS\" \\\n  \
         -H \"webhook-signature: $SIGNATURE\" \\\n  \
         --data-raw \"$BODY\"",
        url = shell_quote(url),
        id_dot = shell_quote(&format!("{event_id}.")),
        id_header = shell_quote(&format!("webhook-id: {event_id}")),
        body = shell_quote(&body),
    )
}

/// The request signed now: pasted into a shell within the receiver's
/// timestamp tolerance (five minutes in the Standard Webhooks libraries)
/// it verifies. The body goes as the exact bytes stored.
pub async fn signed_curl(
    ctx: &Ctx,
    viewer: &Viewer,
    delivery_id: &str,
) -> Result<String, AppError> {
    let copy = events::signed_copy(ctx, &viewer.account_id, delivery_id).await?;
    Ok(format!(
        "curl -X POST {url} \\\n  \
         -H 'content-type: application/json' \\\n  \
         -H {id} \\\n  \
         -H {ts} \\\n  \
         -H {sig} \\\n  \
         --data-raw {body}",
        url = shell_quote(&copy.url),
        id = shell_quote(&format!("webhook-id: {}", copy.event_id)),
        ts = shell_quote(&format!("webhook-timestamp: {}", copy.timestamp)),
        sig = shell_quote(&format!("webhook-signature: {}", copy.signature)),
        body = shell_quote(&String::from_utf8_lossy(&copy.body)),
    ))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

pub async fn resend(ctx: &Ctx, viewer: &Viewer, delivery_id: &str) -> Result<(), AppError> {
    match replay::resend(ctx, &viewer.account_id, delivery_id, &viewer.actor).await {
        Ok(_) => Ok(()),
        Err(e) => Err(match AppError::from(e) {
            AppError::RateLimited { retry_after_s, .. } => AppError::RateLimited {
                retry_after_s,
                delivery_id: Some(delivery_id.to_string()),
            },
            other => other,
        }),
    }
}
