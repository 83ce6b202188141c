//! The server's side of the dashboard port: what server functions in `app`
//! may ask, always scoped to the signed-in viewer's account.

use app::{
    error::AppError,
    model::{Me, Viewer},
    port::Dashboard,
};

use crate::{store::StoreError, web::Ctx};

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
}
