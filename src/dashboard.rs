//! The server's side of the dashboard port: what server functions in `app`
//! may ask, always scoped to the signed-in viewer's account.

use app::{
    error::AppError,
    model::{
        account::{ApiKeyView, Contract, NotificationView},
        admin::{AdminOverview, PreviewLine, ReplayForm, ReplayView},
        endpoints::{EndpointDetail, EndpointSummary, NewEndpointForm},
        events::{EventDetail, EventsList, EventsQuery},
        Me, Viewer,
    },
    port::Dashboard,
};

use crate::{context::Ctx, store::StoreError};

mod account;
mod admin;
mod endpoints;
mod events;
pub(crate) mod guard;
pub(crate) mod login;
pub(crate) mod protect;
pub mod session;

fn internal(e: StoreError) -> AppError {
    match e {
        StoreError::NotFound => AppError::NotFound,
        e => {
            tracing::error!(error = %e, "dashboard query failed");
            AppError::Internal
        }
    }
}

#[async_trait::async_trait]
impl Dashboard for Ctx {
    async fn me(&self, viewer: &Viewer) -> Result<Me, AppError> {
        let user = self.store.user(&viewer.user_id).await.map_err(internal)?;
        let account = self
            .store
            .account(&user.account_id)
            .await
            .map_err(internal)?;
        Ok(Me {
            is_admin: user.is_admin(),
            email: user.email,
            account_name: account.name,
        })
    }

    async fn list_events(
        &self,
        viewer: &Viewer,
        query: EventsQuery,
    ) -> Result<EventsList, AppError> {
        events::list(self, viewer, query).await
    }

    async fn event_detail(&self, viewer: &Viewer, id: &str) -> Result<EventDetail, AppError> {
        events::detail(self, viewer, id).await
    }

    async fn resend(&self, viewer: &Viewer, delivery_id: &str) -> Result<(), AppError> {
        events::resend(self, viewer, delivery_id).await
    }

    async fn list_endpoints(&self, viewer: &Viewer) -> Result<Vec<EndpointSummary>, AppError> {
        endpoints::list(self, viewer).await
    }

    async fn endpoint_detail(&self, viewer: &Viewer, id: &str) -> Result<EndpointDetail, AppError> {
        endpoints::detail(self, viewer, id).await
    }

    async fn create_endpoint(
        &self,
        viewer: &Viewer,
        form: NewEndpointForm,
    ) -> Result<String, AppError> {
        endpoints::create(self, viewer, form).await
    }

    async fn delete_endpoint(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        endpoints::delete(self, viewer, id).await
    }

    async fn set_endpoint_paused(
        &self,
        viewer: &Viewer,
        id: &str,
        paused: bool,
    ) -> Result<(), AppError> {
        endpoints::set_paused(self, viewer, id, paused).await
    }

    async fn rotate_secret(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        endpoints::rotate(self, viewer, id).await
    }

    async fn reveal_secret(&self, viewer: &Viewer, id: &str) -> Result<String, AppError> {
        endpoints::reveal(self, viewer, id).await
    }

    async fn send_test_event(&self, viewer: &Viewer, id: &str) -> Result<String, AppError> {
        endpoints::send_test(self, viewer, id).await
    }

    async fn notifications(&self, viewer: &Viewer) -> Result<Vec<NotificationView>, AppError> {
        account::notifications(self, viewer).await
    }

    async fn contract(&self, _viewer: &Viewer) -> Result<Contract, AppError> {
        Ok(account::contract(self))
    }

    async fn api_keys(&self, viewer: &Viewer) -> Result<Vec<ApiKeyView>, AppError> {
        account::api_keys(self, viewer).await
    }

    async fn create_api_key(&self, viewer: &Viewer) -> Result<String, AppError> {
        account::create_api_key(self, viewer).await
    }

    async fn revoke_api_key(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        account::revoke_api_key(self, viewer, id).await
    }

    async fn admin_overview(&self, viewer: &Viewer) -> Result<AdminOverview, AppError> {
        admin::overview(self, viewer).await
    }

    async fn replay_preview(
        &self,
        viewer: &Viewer,
        form: ReplayForm,
    ) -> Result<Vec<PreviewLine>, AppError> {
        admin::preview(self, viewer, form).await
    }

    async fn replay_start(&self, viewer: &Viewer, form: ReplayForm) -> Result<String, AppError> {
        admin::start(self, viewer, form).await
    }

    async fn replay_status(&self, viewer: &Viewer, id: &str) -> Result<ReplayView, AppError> {
        admin::status(self, viewer, id).await
    }

    async fn replay_cancel(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        admin::cancel(self, viewer, id).await
    }

    async fn audit_log(&self, viewer: &Viewer) -> Result<Vec<ReplayView>, AppError> {
        admin::audit(self, viewer).await
    }
}
