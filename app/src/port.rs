//! What the dashboard needs from the server, as a trait. The server crate
//! implements it and provides it through Leptos context, so this crate never
//! depends on the server's storage or engine.

use std::sync::Arc;

use leptos::prelude::*;

use crate::{
    error::AppError,
    model::{
        account::{ApiKeyView, Contract, NotificationView},
        admin::{AdminOverview, PreviewLine, ReplayForm, ReplayView},
        endpoints::{
            EndpointDetail, EndpointForm, EndpointSummary, RecoverForm, RecoverPreview, Resumed,
        },
        events::{EventDetail, EventsList, EventsQuery},
        team::{InviteForm, Invited, Team},
        Me, Viewer,
    },
};

/// Every method is scoped to the viewer's account: another account's ids
/// are `NotFound` and change nothing.
#[async_trait::async_trait]
pub trait Dashboard: Send + Sync + 'static {
    async fn me(&self, viewer: &Viewer) -> Result<Me, AppError>;
    async fn list_events(
        &self,
        viewer: &Viewer,
        query: EventsQuery,
    ) -> Result<EventsList, AppError>;
    async fn event_detail(&self, viewer: &Viewer, id: &str) -> Result<EventDetail, AppError>;
    async fn resend(&self, viewer: &Viewer, delivery_id: &str) -> Result<(), AppError>;
    /// The delivery's request as a curl command signed now.
    async fn signed_curl(&self, viewer: &Viewer, delivery_id: &str) -> Result<String, AppError>;
    async fn list_endpoints(&self, viewer: &Viewer) -> Result<Vec<EndpointSummary>, AppError>;
    async fn endpoint_detail(&self, viewer: &Viewer, id: &str) -> Result<EndpointDetail, AppError>;
    /// Returns the new endpoint's id.
    async fn create_endpoint(
        &self,
        viewer: &Viewer,
        form: EndpointForm,
    ) -> Result<String, AppError>;
    /// The endpoint's settings as the edit form shows them.
    async fn endpoint_form(&self, viewer: &Viewer, id: &str) -> Result<EndpointForm, AppError>;
    /// Replaces the endpoint's settings with the form's.
    async fn update_endpoint(
        &self,
        viewer: &Viewer,
        id: &str,
        form: EndpointForm,
    ) -> Result<(), AppError>;
    async fn delete_endpoint(&self, viewer: &Viewer, id: &str) -> Result<(), AppError>;
    async fn pause_endpoint(&self, viewer: &Viewer, id: &str) -> Result<(), AppError>;
    /// The queue drains; says what waited.
    async fn resume_endpoint(&self, viewer: &Viewer, id: &str) -> Result<Resumed, AppError>;
    /// Ends a paused endpoint's queue if it still holds `expected`
    /// deliveries; returns how many were discarded.
    async fn discard_queue(
        &self,
        viewer: &Viewer,
        id: &str,
        expected: i64,
    ) -> Result<i64, AppError>;
    /// How many failed or expired deliveries a recovery would send again.
    async fn recover_preview(
        &self,
        viewer: &Viewer,
        id: &str,
        form: RecoverForm,
    ) -> Result<RecoverPreview, AppError>;
    /// Sends again what failed or expired since `since`; returns how many.
    async fn recover(&self, viewer: &Viewer, id: &str, since: i64) -> Result<i64, AppError>;
    async fn rotate_secret(&self, viewer: &Viewer, id: &str) -> Result<(), AppError>;
    async fn reveal_secret(&self, viewer: &Viewer, id: &str) -> Result<String, AppError>;
    /// Sends a `dakghar.test` event to this endpoint only; returns its id.
    async fn send_test_event(&self, viewer: &Viewer, id: &str) -> Result<String, AppError>;
    async fn notifications(&self, viewer: &Viewer) -> Result<Vec<NotificationView>, AppError>;
    async fn contract(&self, viewer: &Viewer) -> Result<Contract, AppError>;
    async fn api_keys(&self, viewer: &Viewer) -> Result<Vec<ApiKeyView>, AppError>;
    /// Returns the whole key, shown once.
    async fn create_api_key(&self, viewer: &Viewer, name: &str) -> Result<String, AppError>;
    async fn revoke_api_key(&self, viewer: &Viewer, id: &str) -> Result<(), AppError>;
    // Admin only: implementations refuse members with `Forbidden`.
    async fn admin_overview(&self, viewer: &Viewer) -> Result<AdminOverview, AppError>;
    async fn replay_preview(
        &self,
        viewer: &Viewer,
        form: ReplayForm,
    ) -> Result<Vec<PreviewLine>, AppError>;
    /// Returns the replay's id.
    async fn replay_start(&self, viewer: &Viewer, form: ReplayForm) -> Result<String, AppError>;
    async fn replay_status(&self, viewer: &Viewer, id: &str) -> Result<ReplayView, AppError>;
    async fn replay_cancel(&self, viewer: &Viewer, id: &str) -> Result<(), AppError>;
    async fn audit_log(&self, viewer: &Viewer) -> Result<Vec<ReplayView>, AppError>;
    async fn platform_keys(&self, viewer: &Viewer) -> Result<Vec<ApiKeyView>, AppError>;
    /// Returns the whole key, shown once.
    async fn create_platform_key(&self, viewer: &Viewer, name: &str) -> Result<String, AppError>;
    async fn revoke_platform_key(&self, viewer: &Viewer, id: &str) -> Result<(), AppError>;
    // The team: owners only.
    async fn team(&self, viewer: &Viewer) -> Result<Team, AppError>;
    async fn invite(&self, viewer: &Viewer, form: InviteForm) -> Result<Invited, AppError>;
    async fn change_role(&self, viewer: &Viewer, user_id: &str, role: &str)
        -> Result<(), AppError>;
    /// Removing a member ends their sessions.
    async fn remove_member(&self, viewer: &Viewer, user_id: &str) -> Result<(), AppError>;
    async fn withdraw_invitation(&self, viewer: &Viewer, id: &str) -> Result<(), AppError>;
}

pub type DashboardRef = Arc<dyn Dashboard>;

/// The services and the signed-in viewer of the current request.
pub fn services() -> Result<(DashboardRef, Viewer), AppError> {
    let services = use_context::<DashboardRef>().ok_or(AppError::Internal)?;
    let parts = use_context::<http::request::Parts>().ok_or(AppError::Internal)?;
    let Some(viewer) = parts.extensions.get::<Viewer>().cloned() else {
        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(http::StatusCode::UNAUTHORIZED);
        }
        return Err(AppError::Unauthorized);
    };
    Ok((services, viewer))
}

/// Like `services`, for server functions that change something: a request
/// another site's page made (a forged form post) is refused.
pub fn services_for_change() -> Result<(DashboardRef, Viewer), AppError> {
    let parts = use_context::<http::request::Parts>().ok_or(AppError::Internal)?;
    if is_cross_site(&parts.headers) {
        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(http::StatusCode::FORBIDDEN);
        }
        return Err(AppError::Forbidden);
    }
    services()
}

/// Browsers say where a request came from in `Sec-Fetch-Site`; older ones
/// only in `Origin`, which must then name this host.
pub fn is_cross_site(headers: &http::HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return !matches!(site.to_str(), Ok("same-origin" | "none"));
    }
    let Some(origin) = headers.get(http::header::ORIGIN) else {
        return false;
    };
    let host = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest.trim_end_matches('/'));
    origin_host != Some(host)
}

/// Lets the caller see the status and `Retry-After` of a rate-limited
/// request, as the REST API answers. Not for a plain form post (a page
/// without JavaScript): its answer must stay the redirect back to the
/// page, which then says how long to wait; a 429 would leave the browser
/// on an error body.
pub fn answer_rate_limited(error: &AppError) {
    let AppError::RateLimited { retry_after_s, .. } = error else {
        return;
    };
    let form_post = use_context::<http::request::Parts>().is_some_and(|parts| {
        parts
            .headers
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/html"))
    });
    if form_post {
        return;
    }
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::TOO_MANY_REQUESTS);
        response.insert_header(
            http::header::RETRY_AFTER,
            http::HeaderValue::from(*retry_after_s),
        );
    }
}

/// What every server function answers: a refusal of the viewer's role is
/// a 403 and something missing a 404, never a 500 or a 200 (a page that
/// renders the answer gets the same status).
pub fn answered<T>(result: Result<T, AppError>) -> Result<T, AppError> {
    let status = match &result {
        Err(AppError::Forbidden) => Some(http::StatusCode::FORBIDDEN),
        Err(AppError::NotFound) => Some(http::StatusCode::NOT_FOUND),
        _ => None,
    };
    if let (Some(status), Some(response)) = (status, use_context::<leptos_axum::ResponseOptions>())
    {
        response.set_status(status);
    }
    result
}

/// For admin server functions: the signed-in viewer must be an admin (403
/// otherwise); `changing` adds the cross-site check.
pub fn admin_services(changing: bool) -> Result<(DashboardRef, Viewer), AppError> {
    let (services, viewer) = if changing {
        services_for_change()?
    } else {
        services()?
    };
    if !viewer.is_admin || viewer.portal {
        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(http::StatusCode::FORBIDDEN);
        }
        return Err(AppError::Forbidden);
    }
    Ok((services, viewer))
}
