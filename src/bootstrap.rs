//! The first start of a fresh installation: an admin to sign in with.

use crate::{
    auth::password,
    clock::Clock,
    ids,
    store::{Role, Store, StoreError},
};

pub const FIRST_ACCOUNT: &str = "default";
pub const FIRST_ADMIN_EMAIL: &str = "admin@localhost";

pub struct FirstAdmin {
    pub email: String,
    pub password: String,
}

/// Creates an admin with a random password when the database has no user
/// at all; returns the credentials so they can be shown once.
pub async fn first_admin(
    store: &Store,
    clock: &dyn Clock,
) -> Result<Option<FirstAdmin>, StoreError> {
    if store.count_users().await? > 0 {
        return Ok(None);
    }
    let account = match store.account_by_name(FIRST_ACCOUNT).await {
        Ok(a) => a,
        Err(StoreError::NotFound) => store.create_account(FIRST_ACCOUNT, clock.now()).await?,
        Err(e) => return Err(e),
    };
    let secret = ids::random_token(20);
    let hash = password::hash_off_thread(secret.clone())
        .await
        .map_err(|e| StoreError::Config(e.to_string()))?;
    store
        .create_user(
            &account.id,
            FIRST_ADMIN_EMAIL,
            &hash,
            Role::Admin,
            clock.now(),
        )
        .await?;
    Ok(Some(FirstAdmin {
        email: FIRST_ADMIN_EMAIL.to_string(),
        password: secret,
    }))
}
