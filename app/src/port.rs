//! What the dashboard needs from the server, as a trait. The server crate
//! implements it and provides it through Leptos context, so this crate never
//! depends on the server's storage or engine.

use std::sync::Arc;

use leptos::prelude::*;

use crate::{
    error::AppError,
    model::{Me, Viewer},
};

#[async_trait::async_trait]
pub trait Dashboard: Send + Sync + 'static {
    async fn me(&self, viewer: &Viewer) -> Result<Me, AppError>;
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
