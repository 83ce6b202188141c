//! Server functions of the admin pages. Each checks the role on the server:
//! a member gets 403 whatever the page showed them.

use leptos::prelude::*;

use crate::{
    error::AppError,
    model::{
        account::ApiKeyView,
        admin::{AdminOverview, PreviewLine, ReplayForm, ReplayView},
    },
};

#[server(prefix = "/_fn", endpoint = "admin_overview")]
pub async fn get_admin_overview() -> Result<AdminOverview, AppError> {
    let (services, viewer) = crate::port::admin_services(false)?;
    crate::port::answered(services.admin_overview(&viewer).await)
}

#[server(prefix = "/_fn", endpoint = "admin_replay_preview")]
pub async fn replay_preview(
    #[server(default)] form: ReplayForm,
) -> Result<Vec<PreviewLine>, AppError> {
    let (services, viewer) = crate::port::admin_services(false)?;
    crate::port::answered(services.replay_preview(&viewer, form).await)
}

#[server(prefix = "/_fn", endpoint = "admin_replay_start")]
pub async fn replay_start(form: ReplayForm) -> Result<String, AppError> {
    let (services, viewer) = crate::port::admin_services(true)?;
    let id = crate::port::answered(services.replay_start(&viewer, form).await)?;
    leptos_axum::redirect(&format!("/admin/replays/{id}"));
    Ok(id)
}

#[server(prefix = "/_fn", endpoint = "admin_replay")]
pub async fn replay_status(id: String) -> Result<ReplayView, AppError> {
    let (services, viewer) = crate::port::admin_services(false)?;
    crate::port::answered(services.replay_status(&viewer, &id).await)
}

#[server(prefix = "/_fn", endpoint = "admin_replay_cancel")]
pub async fn replay_cancel(id: String) -> Result<(), AppError> {
    let (services, viewer) = crate::port::admin_services(true)?;
    crate::port::answered(services.replay_cancel(&viewer, &id).await)
}

#[server(prefix = "/_fn", endpoint = "admin_audit")]
pub async fn audit_log() -> Result<Vec<ReplayView>, AppError> {
    let (services, viewer) = crate::port::admin_services(false)?;
    crate::port::answered(services.audit_log(&viewer).await)
}

#[server(prefix = "/_fn", endpoint = "admin_platform_keys")]
pub async fn list_platform_keys() -> Result<Vec<ApiKeyView>, AppError> {
    let (services, viewer) = crate::port::admin_services(false)?;
    crate::port::answered(services.platform_keys(&viewer).await)
}

/// Returns the whole key: the only time anyone sees it.
#[server(prefix = "/_fn", endpoint = "admin_platform_key_create")]
pub async fn create_platform_key(name: String) -> Result<String, AppError> {
    let (services, viewer) = crate::port::admin_services(true)?;
    crate::port::answered(services.create_platform_key(&viewer, &name).await)
}

#[server(prefix = "/_fn", endpoint = "admin_platform_key_revoke")]
pub async fn revoke_platform_key(id: String) -> Result<(), AppError> {
    let (services, viewer) = crate::port::admin_services(true)?;
    crate::port::answered(services.revoke_platform_key(&viewer, &id).await)
}
