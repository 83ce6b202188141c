//! Server functions of the endpoints pages. The changing ones refuse
//! cross-site requests and, posted as plain forms, come back to a page.

use leptos::prelude::*;

use crate::{
    error::AppError,
    model::endpoints::{EndpointDetail, EndpointForm, EndpointSummary, Resumed},
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
