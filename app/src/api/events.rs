//! Server functions of the events pages.

use leptos::prelude::*;

use crate::{
    error::AppError,
    model::events::{EventDetail, EventsList, EventsQuery},
};

#[server(prefix = "/_fn", endpoint = "events")]
pub async fn list_events(#[server(default)] query: EventsQuery) -> Result<EventsList, AppError> {
    let (services, viewer) = crate::port::services()?;
    crate::port::answered(services.list_events(&viewer, query).await)
}

#[server(prefix = "/_fn", endpoint = "event")]
pub async fn get_event(id: String) -> Result<EventDetail, AppError> {
    let (services, viewer) = crate::port::services()?;
    crate::port::answered(services.event_detail(&viewer, &id).await)
}

/// Resend one finished delivery (SPEC §5); over the per-endpoint limit the
/// answer is 429 with `Retry-After`.
#[server(prefix = "/_fn", endpoint = "resend")]
pub async fn resend_delivery(delivery_id: String) -> Result<(), AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    let result = crate::port::answered(services.resend(&viewer, &delivery_id).await);
    if let Err(e) = &result {
        crate::port::answer_rate_limited(e);
    }
    result
}

/// The delivery's request as a curl command signed now, for roles that may
/// see secrets: pasted into a shell it reaches the receiver and verifies.
/// It reads, but a signature must never be fetchable cross-site.
#[server(prefix = "/_fn", endpoint = "signed_curl")]
pub async fn signed_curl(delivery_id: String) -> Result<String, AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.signed_curl(&viewer, &delivery_id).await)
}
