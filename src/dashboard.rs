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
        endpoints::{
            EndpointDetail, EndpointForm, EndpointSummary, RecoverForm, RecoverPreview, Resumed,
        },
        events::{EventDetail, EventsList, EventsQuery},
        team::{InviteForm, Invited, Team},
        AccountRole, Me, Permission, Viewer,
    },
    port::Dashboard,
};

use crate::{accounts, context::Ctx, error::Error, store};

mod account;
mod account_links;
mod admin;
mod endpoints;
mod events;
pub(crate) mod guard;
pub(crate) mod login;
pub(crate) mod portal;
pub(crate) mod protect;
mod routes;
pub mod session;
pub mod site_files;
mod team;

pub(crate) use routes::routes;

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
            Error::Conflict(message) | Error::ConflictCode { message, .. } => {
                AppError::Conflict(message)
            }
            Error::RateLimited { retry_after_s, .. } => AppError::RateLimited {
                retry_after_s,
                delivery_id: None,
            },
            Error::Unauthorized(_) => AppError::Unauthorized,
            e @ (Error::Store(_) | Error::Password(_)) => {
                tracing::error!(error = %e, "dashboard query failed");
                AppError::Internal
            }
        }
    }
}

/// The store's role as the pages know it.
pub(crate) fn app_role(role: store::AccountRole) -> AccountRole {
    match role {
        store::AccountRole::Owner => AccountRole::Owner,
        store::AccountRole::Developer => AccountRole::Developer,
        store::AccountRole::Viewer => AccountRole::Viewer,
    }
}

/// Refuses what the viewer's role does not allow: the one check every
/// method below makes first, whatever the page offered.
fn need(viewer: &Viewer, permission: Permission) -> Result<(), AppError> {
    if viewer.may(permission) {
        Ok(())
    } else {
        Err(AppError::Forbidden)
    }
}

#[async_trait::async_trait]
impl Dashboard for Adapter {
    async fn me(&self, viewer: &Viewer) -> Result<Me, AppError> {
        let store = &self.ctx.store;
        let (email, account) = match &viewer.user_id {
            Some(id) => {
                let (user, account) = accounts::user_and_account(store, id).await?;
                (user.email, account)
            }
            None => (
                String::new(),
                store
                    .account(&viewer.account_id)
                    .await
                    .map_err(Error::from)?,
            ),
        };
        let back = viewer.return_url.as_ref().map(|url| {
            let host = url::Url::parse(url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_string))
                .unwrap_or_else(|| url.clone());
            (url.clone(), host)
        });
        Ok(Me {
            email,
            account_name: account.name,
            is_admin: viewer.is_admin,
            role: viewer.role,
            portal: viewer.portal,
            back,
            can_change: viewer.may(Permission::Change),
            can_see_secrets: viewer.may(Permission::SeeSecrets),
            can_manage_team: viewer.may(Permission::ManageTeam),
            can_manage_keys: viewer.may(Permission::ManageKeys),
        })
    }

    async fn list_events(
        &self,
        viewer: &Viewer,
        query: EventsQuery,
    ) -> Result<EventsList, AppError> {
        need(viewer, Permission::Read)?;
        events::list(&self.ctx, viewer, query).await
    }

    async fn event_detail(&self, viewer: &Viewer, id: &str) -> Result<EventDetail, AppError> {
        need(viewer, Permission::Read)?;
        events::detail(&self.ctx, viewer, id).await
    }

    async fn resend(&self, viewer: &Viewer, delivery_id: &str) -> Result<(), AppError> {
        need(viewer, Permission::Change)?;
        events::resend(&self.ctx, viewer, delivery_id).await
    }

    async fn signed_curl(&self, viewer: &Viewer, delivery_id: &str) -> Result<String, AppError> {
        need(viewer, Permission::SeeSecrets)?;
        events::signed_curl(&self.ctx, viewer, delivery_id).await
    }

    async fn list_endpoints(&self, viewer: &Viewer) -> Result<Vec<EndpointSummary>, AppError> {
        need(viewer, Permission::Read)?;
        endpoints::list(&self.ctx, viewer).await
    }

    async fn endpoint_detail(&self, viewer: &Viewer, id: &str) -> Result<EndpointDetail, AppError> {
        need(viewer, Permission::Read)?;
        endpoints::detail(&self.ctx, viewer, id).await
    }

    async fn create_endpoint(
        &self,
        viewer: &Viewer,
        form: EndpointForm,
    ) -> Result<String, AppError> {
        need(viewer, Permission::Change)?;
        endpoints::create(&self.ctx, viewer, form).await
    }

    async fn endpoint_form(&self, viewer: &Viewer, id: &str) -> Result<EndpointForm, AppError> {
        need(viewer, Permission::Change)?;
        endpoints::form(&self.ctx, viewer, id).await
    }

    async fn update_endpoint(
        &self,
        viewer: &Viewer,
        id: &str,
        form: EndpointForm,
    ) -> Result<(), AppError> {
        need(viewer, Permission::Change)?;
        endpoints::update(&self.ctx, viewer, id, form).await
    }

    async fn delete_endpoint(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        need(viewer, Permission::Change)?;
        endpoints::delete(&self.ctx, viewer, id).await
    }

    async fn pause_endpoint(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        need(viewer, Permission::Change)?;
        endpoints::pause(&self.ctx, viewer, id).await
    }

    async fn resume_endpoint(&self, viewer: &Viewer, id: &str) -> Result<Resumed, AppError> {
        need(viewer, Permission::Change)?;
        endpoints::resume(&self.ctx, viewer, id).await
    }

    async fn discard_queue(
        &self,
        viewer: &Viewer,
        id: &str,
        expected: i64,
    ) -> Result<i64, AppError> {
        need(viewer, Permission::Change)?;
        endpoints::discard_queue(&self.ctx, viewer, id, expected).await
    }

    async fn recover_preview(
        &self,
        viewer: &Viewer,
        id: &str,
        form: RecoverForm,
    ) -> Result<RecoverPreview, AppError> {
        need(viewer, Permission::Change)?;
        endpoints::recover_preview(&self.ctx, viewer, id, form).await
    }

    async fn recover(&self, viewer: &Viewer, id: &str, since: i64) -> Result<i64, AppError> {
        need(viewer, Permission::Change)?;
        endpoints::recover(&self.ctx, viewer, id, since).await
    }

    async fn rotate_secret(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        need(viewer, Permission::SeeSecrets)?;
        endpoints::rotate(&self.ctx, viewer, id).await
    }

    async fn reveal_secret(&self, viewer: &Viewer, id: &str) -> Result<String, AppError> {
        need(viewer, Permission::SeeSecrets)?;
        endpoints::reveal(&self.ctx, viewer, id).await
    }

    async fn send_test_event(&self, viewer: &Viewer, id: &str) -> Result<String, AppError> {
        need(viewer, Permission::Change)?;
        endpoints::send_test(&self.ctx, viewer, id).await
    }

    async fn notifications(&self, viewer: &Viewer) -> Result<Vec<NotificationView>, AppError> {
        need(viewer, Permission::Read)?;
        account::notifications(&self.ctx, viewer).await
    }

    async fn contract(&self, viewer: &Viewer) -> Result<Contract, AppError> {
        need(viewer, Permission::Read)?;
        Ok(account::contract(&self.ctx, &self.api_operations))
    }

    async fn api_keys(&self, viewer: &Viewer) -> Result<Vec<ApiKeyView>, AppError> {
        need(viewer, Permission::ManageKeys)?;
        account::api_keys(&self.ctx, viewer).await
    }

    async fn create_api_key(&self, viewer: &Viewer, name: &str) -> Result<String, AppError> {
        need(viewer, Permission::ManageKeys)?;
        account::create_api_key(&self.ctx, viewer, name).await
    }

    async fn revoke_api_key(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        need(viewer, Permission::ManageKeys)?;
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

    async fn platform_keys(&self, viewer: &Viewer) -> Result<Vec<ApiKeyView>, AppError> {
        admin::platform_keys(&self.ctx, viewer).await
    }

    async fn create_platform_key(&self, viewer: &Viewer, name: &str) -> Result<String, AppError> {
        admin::create_platform_key(&self.ctx, viewer, name).await
    }

    async fn revoke_platform_key(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        admin::revoke_platform_key(&self.ctx, viewer, id).await
    }

    async fn team(&self, viewer: &Viewer) -> Result<Team, AppError> {
        need(viewer, Permission::ManageTeam)?;
        team::team(&self.ctx, viewer).await
    }

    async fn invite(&self, viewer: &Viewer, form: InviteForm) -> Result<Invited, AppError> {
        need(viewer, Permission::ManageTeam)?;
        team::invite(&self.ctx, viewer, form).await
    }

    async fn change_role(
        &self,
        viewer: &Viewer,
        user_id: &str,
        role: &str,
    ) -> Result<(), AppError> {
        need(viewer, Permission::ManageTeam)?;
        team::change_role(&self.ctx, viewer, user_id, role).await
    }

    async fn remove_member(&self, viewer: &Viewer, user_id: &str) -> Result<(), AppError> {
        need(viewer, Permission::ManageTeam)?;
        team::remove(&self.ctx, viewer, user_id).await
    }

    async fn withdraw_invitation(&self, viewer: &Viewer, id: &str) -> Result<(), AppError> {
        need(viewer, Permission::ManageTeam)?;
        team::withdraw(&self.ctx, viewer, id).await
    }
}
