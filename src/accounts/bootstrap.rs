//! The first start of a fresh installation: an admin to sign in with.

use super::ensure_account;
use crate::{
    auth::password,
    clock::Clock,
    error::Result,
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
pub async fn first_admin(store: &Store, clock: &dyn Clock) -> Result<Option<FirstAdmin>> {
    if store.count_users().await? > 0 {
        return Ok(None);
    }
    let account = ensure_account(store, FIRST_ACCOUNT, clock.now()).await?;
    let secret = ids::random_token(20);
    let hash = password::hash_off_thread(secret.clone()).await?;
    match store
        .create_user(
            &account.id,
            FIRST_ADMIN_EMAIL,
            &hash,
            Role::Admin,
            clock.now(),
        )
        .await
    {
        Ok(_) => {}
        // Several nodes started at once on an empty database: one of them
        // made the admin and shows the password; the others just serve.
        Err(StoreError::Conflict(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    Ok(Some(FirstAdmin {
        email: FIRST_ADMIN_EMAIL.to_string(),
        password: secret,
    }))
}
