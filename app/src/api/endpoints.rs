//! Server functions of the endpoints pages. The changing ones refuse
//! cross-site requests and, posted as plain forms, come back to a page.

use leptos::prelude::*;

use crate::{
    error::AppError,
    model::endpoints::{
        EndpointDetail, EndpointForm, EndpointSummary, RecoverForm, RecoverPreview, Resumed,
    },
};

#[server(prefix = "/_fn", endpoint = "endpoints")]
pub async fn list_endpoints() -> Result<Vec<EndpointSummary>, AppError> {
    let (services, viewer) = crate::port::services()?;
    crate::port::answered(services.list_endpoints(&viewer).await)
}

#[server(prefix = "/_fn", endpoint = "endpoint")]
pub async fn get_endpoint(id: String) -> Result<EndpointDetail, AppError> {
    let (services, viewer) = crate::port::services()?;
    crate::port::answered(services.endpoint_detail(&viewer, &id).await)
}

#[server(prefix = "/_fn", endpoint = "endpoint_create")]
pub async fn create_endpoint(form: EndpointForm) -> Result<String, AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    let id = crate::port::answered(services.create_endpoint(&viewer, form).await)?;
    leptos_axum::redirect(&format!("/endpoints/{id}"));
    Ok(id)
}

#[server(prefix = "/_fn", endpoint = "endpoint_form")]
pub async fn get_endpoint_form(id: String) -> Result<EndpointForm, AppError> {
    let (services, viewer) = crate::port::services()?;
    crate::port::answered(services.endpoint_form(&viewer, &id).await)
}

#[server(prefix = "/_fn", endpoint = "endpoint_update")]
pub async fn update_endpoint(id: String, form: EndpointForm) -> Result<(), AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.update_endpoint(&viewer, &id, form).await)?;
    leptos_axum::redirect(&format!("/endpoints/{}", crate::format::path_segment(&id)));
    Ok(())
}

#[server(prefix = "/_fn", endpoint = "endpoint_delete")]
pub async fn delete_endpoint(id: String) -> Result<(), AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.delete_endpoint(&viewer, &id).await)?;
    leptos_axum::redirect("/endpoints");
    Ok(())
}

#[server(prefix = "/_fn", endpoint = "endpoint_pause")]
pub async fn pause_endpoint(id: String) -> Result<(), AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.pause_endpoint(&viewer, &id).await)
}

#[server(prefix = "/_fn", endpoint = "endpoint_resume")]
pub async fn resume_endpoint(id: String) -> Result<Resumed, AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.resume_endpoint(&viewer, &id).await)
}

#[server(prefix = "/_fn", endpoint = "endpoint_discard_queue")]
pub async fn discard_queue(id: String, expected: i64) -> Result<i64, AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.discard_queue(&viewer, &id, expected).await)
}

/// Counts what a recovery would send again; nothing changes.
#[server(prefix = "/_fn", endpoint = "endpoint_recover_preview")]
pub async fn preview_recovery(id: String, form: RecoverForm) -> Result<RecoverPreview, AppError> {
    let (services, viewer) = crate::port::services()?;
    crate::port::answered(services.recover_preview(&viewer, &id, form).await)
}

/// Sends again what failed or expired since `since` (SPEC §5's replay,
/// for one endpoint); over the endpoint's limit, 429 with `Retry-After`.
#[server(prefix = "/_fn", endpoint = "endpoint_recover")]
pub async fn recover(id: String, since: i64) -> Result<i64, AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    let result = crate::port::answered(services.recover(&viewer, &id, since).await);
    match &result {
        Ok(n) => leptos_axum::redirect(&format!(
            "/endpoints/{}?recovered={n}",
            crate::format::path_segment(&id)
        )),
        Err(e) => crate::port::answer_rate_limited(e),
    }
    result
}

#[server(prefix = "/_fn", endpoint = "endpoint_rotate")]
pub async fn rotate_secret(id: String) -> Result<(), AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.rotate_secret(&viewer, &id).await)
}

/// A POST, refused cross-site: the secret is the one thing that must
/// never leak to another page.
#[server(prefix = "/_fn", endpoint = "endpoint_secret")]
pub async fn reveal_secret(id: String) -> Result<String, AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.reveal_secret(&viewer, &id).await)
}

#[server(prefix = "/_fn", endpoint = "endpoint_test")]
pub async fn send_test_event(id: String) -> Result<String, AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.send_test_event(&viewer, &id).await)
}
