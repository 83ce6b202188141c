//! Server functions of the account pages: notifications, API keys, docs.

use leptos::prelude::*;

use crate::{
    error::AppError,
    model::account::{ApiKeyView, Contract, NotificationView},
};

#[server(prefix = "/_fn", endpoint = "notifications")]
pub async fn list_notifications() -> Result<Vec<NotificationView>, AppError> {
    let (services, viewer) = crate::port::services()?;
    crate::port::answered(services.notifications(&viewer).await)
}

#[server(prefix = "/_fn", endpoint = "contract")]
pub async fn get_contract() -> Result<Contract, AppError> {
    let (services, viewer) = crate::port::services()?;
    crate::port::answered(services.contract(&viewer).await)
}

#[server(prefix = "/_fn", endpoint = "api_keys")]
pub async fn list_api_keys() -> Result<Vec<ApiKeyView>, AppError> {
    let (services, viewer) = crate::port::services()?;
    crate::port::answered(services.api_keys(&viewer).await)
}

/// Returns the whole key: the only time anyone sees it.
#[server(prefix = "/_fn", endpoint = "api_key_create")]
pub async fn create_api_key(name: String) -> Result<String, AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.create_api_key(&viewer, &name).await)
}

#[server(prefix = "/_fn", endpoint = "api_key_revoke")]
pub async fn revoke_api_key(id: String) -> Result<(), AppError> {
    let (services, viewer) = crate::port::services_for_change()?;
    crate::port::answered(services.revoke_api_key(&viewer, &id).await)
}
