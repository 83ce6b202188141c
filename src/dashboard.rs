//! The dashboard face: the server's side of the `Dashboard` port that the
//! `app` crate's server functions call (always scoped to the signed-in
//! viewer's account), and the browser-facing HTTP around the pages (sign
//! in and out, the session guard, the browser protections). Like `api/`
//! it is a thin face over the domain: it reads forms and builds views.

use std::sync::Arc;

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

use crate::{accounts, context::Ctx, error::Error};

mod account;
mod admin;
mod endpoints;
mod events;
pub(crate) mod guard;
pub(crate) mod login;
pub(crate) mod protect;
pub mod session;

/// What the port needs: the context, and the REST API's operations for the
/// docs page (the composition root passes them in: this face never reads
/// the other).
pub struct Adapter {
    ctx: Arc<Ctx>,
    api_operations: Vec<(String, String, String)>,
}

impl Adapter {
    pub fn new(ctx: Arc<Ctx>, api_operations: Vec<(String, String, String)>) -> Adapter {
        Adapter {
            ctx,
            api_operations,
        }
    }
}

/// A domain error as the browser sees it: words for the customer's own
/// mistakes, nothing of ours (that is logged).
impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        match e {
            Error::NotFound(_) => AppError::NotFound,
            Error::Invalid { message, .. } => AppError::Invalid(message),
            Error::Conflict(message) => AppError::Conflict(message),
            Error::RateLimited { retry_after_s, .. } => AppError::RateLimited { retry_after_s },
            Error::Unauthorized(_) => AppError::Unauthorized,
            e @ (Error::Store(_) | Error::Password(_)) => {
                tracing::error!(error = %e, "dashboard query failed");
                AppError::Internal
            }
        }
    }
}

#[async_trait::async_trait]
impl Dashboard for Adapter {
    async fn me(&self, viewer: &Viewer) -> Result<Me, AppError> {
        let (user, account) = accounts::user_and_account(&self.ctx.store, &viewer.user_id).await?;
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
        events::list(&self.ctx, viewer, query).await
    }

    async fn event_detail(&self, viewer: &Viewer, id: &str) -> Result<EventDetail, AppError> {
        events::detail(&self.ctx, viewer, id).await
    }

    async fn resend(&self, viewer: &Viewer, delivery_id: &str) -> Result<(), AppError> {
        events::resend(&self.ctx, viewer, delivery_id).await
    }

    async fn list_endpoints(&self, viewer: &Viewer) -> Result<Vec<EndpointSummary>, AppError> {
        endpoints::list(&self.ctx, viewer).await
    }

    async fn endpoint_detail(&self, viewer: &Viewer, id: &str) -> Result<EndpointDetail, AppError> {
        endpoints::detail(&self.ctx, viewer, id).await
    }

    async fn create_endpoint(
        &self,
        viewer: &Viewer,
        form: NewEndpointForm,
    ) -> Result<String, AppError> {
        endpoints::create(&self.ctx, viewer, form).await
    }

    async fn delete_endpoint(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        endpoints::delete(&self.ctx, viewer, id).await
    }

    async fn set_endpoint_paused(
        &self,
        viewer: &Viewer,
        id: &str,
        paused: bool,
    ) -> Result<(), AppError> {
        endpoints::set_paused(&self.ctx, viewer, id, paused).await
    }

    async fn rotate_secret(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        endpoints::rotate(&self.ctx, viewer, id).await
    }

    async fn reveal_secret(&self, viewer: &Viewer, id: &str) -> Result<String, AppError> {
        endpoints::reveal(&self.ctx, viewer, id).await
    }

    async fn send_test_event(&self, viewer: &Viewer, id: &str) -> Result<String, AppError> {
        endpoints::send_test(&self.ctx, viewer, id).await
    }

    async fn notifications(&self, viewer: &Viewer) -> Result<Vec<NotificationView>, AppError> {
        account::notifications(&self.ctx, viewer).await
    }

    async fn contract(&self, _viewer: &Viewer) -> Result<Contract, AppError> {
        Ok(account::contract(&self.ctx, &self.api_operations))
    }

    async fn api_keys(&self, viewer: &Viewer) -> Result<Vec<ApiKeyView>, AppError> {
        account::api_keys(&self.ctx, viewer).await
    }

    async fn create_api_key(&self, viewer: &Viewer) -> Result<String, AppError> {
        account::create_api_key(&self.ctx, viewer).await
    }

    async fn revoke_api_key(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        account::revoke_api_key(&self.ctx, viewer, id).await
    }

    async fn admin_overview(&self, viewer: &Viewer) -> Result<AdminOverview, AppError> {
        admin::overview(&self.ctx, viewer).await
    }

    async fn replay_preview(
        &self,
        viewer: &Viewer,
        form: ReplayForm,
    ) -> Result<Vec<PreviewLine>, AppError> {
        admin::preview(&self.ctx, viewer, form).await
    }

    async fn replay_start(&self, viewer: &Viewer, form: ReplayForm) -> Result<String, AppError> {
        admin::start(&self.ctx, viewer, form).await
    }

    async fn replay_status(&self, viewer: &Viewer, id: &str) -> Result<ReplayView, AppError> {
        admin::status(&self.ctx, viewer, id).await
    }

    async fn replay_cancel(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        admin::cancel(&self.ctx, viewer, id).await
    }

    async fn audit_log(&self, viewer: &Viewer) -> Result<Vec<ReplayView>, AppError> {
        admin::audit(&self.ctx, viewer).await
    }
}
