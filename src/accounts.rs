//! Accounts (SPEC §1): the tenants, their dashboard users and API keys,
//! the first admin of a fresh installation, and signing in. The command
//! line and the dashboard create and change them only through here.

mod bootstrap;
pub mod key_use;
mod links;
pub mod password_reset;
pub mod platform;
pub mod portal;
mod sign_in;
pub mod team;

pub use crate::store::KeyHolder;
pub use bootstrap::{first_admin, FirstAdmin, FIRST_ACCOUNT, FIRST_ADMIN_EMAIL};
pub use sign_in::{sign_in, SignIn};

use crate::{
    auth::{api_key, password},
    clock::Timestamp,
    context::Ctx,
    error::{Error, OrNotFound, Result},
    store::{
        Account, AccountOverview, ApiKey, GlobalRates, Notification, Role, Store, StoreError, User,
    },
};

/// A new account; names are unique.
pub async fn create_account(store: &Store, name: &str, now: Timestamp) -> Result<Account> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Error::invalid(
            "invalid_name",
            "account name must not be empty",
        ));
    }
    Ok(store.create_account(name, now).await?)
}

/// The account with this name, creating it if there is none (another node
/// may create it at the same moment: then theirs is the one).
pub async fn ensure_account(store: &Store, name: &str, now: Timestamp) -> Result<Account> {
    match store.account_by_name(name).await {
        Ok(a) => Ok(a),
        Err(StoreError::NotFound) => match store.create_account(name, now).await {
            Ok(a) => Ok(a),
            Err(StoreError::Conflict(_)) => Ok(store.account_by_name(name).await?),
            Err(e) => Err(e.into()),
        },
        Err(e) => Err(e.into()),
    }
}

pub async fn named(store: &Store, name: &str) -> Result<Account> {
    store.account_by_name(name).await.or_not_found("account")
}

/// Emails are compared in lower case, without outer spaces.
pub fn normalize_email(email: &str) -> Result<String> {
    // Counted as typed, as the API's schema counts it.
    let short = email.chars().count() <= 254;
    let email = email.trim().to_lowercase();
    let valid = short
        && email
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty())
        && !email.chars().any(char::is_whitespace);
    if valid {
        Ok(email)
    } else {
        Err(Error::invalid(
            "invalid_email",
            format!("{email:?} is not an email address"),
        ))
    }
}

/// A user of `account_id` with this password (hashed off the async
/// runtime; the password rules apply).
pub async fn create_user(
    store: &Store,
    account_id: &str,
    email: &str,
    password: String,
    role: Role,
    now: Timestamp,
) -> Result<User> {
    let email = normalize_email(email)?;
    let hash = password::hash_off_thread(password).await?;
    Ok(store
        .create_user(account_id, &email, &hash, role, now)
        .await?)
}

/// A new API key of the account; the whole key is in the answer, the only
/// time anyone sees it.
pub async fn create_api_key(
    store: &Store,
    account_id: &str,
    name: &str,
    admin: bool,
    now: Timestamp,
) -> Result<api_key::NewKey> {
    let name = key_use::checked_name(name)?;
    let key = api_key::generate();
    store
        .create_api_key(account_id, &name, &key.prefix, &key.hash, admin, now)
        .await?;
    Ok(key)
}

pub async fn api_keys(store: &Store, account_id: &str) -> Result<Vec<ApiKey>> {
    Ok(store.list_api_keys(account_id).await?)
}

pub async fn revoke_api_key(
    store: &Store,
    account_id: &str,
    id: &str,
    now: Timestamp,
) -> Result<()> {
    store
        .revoke_api_key(account_id, id, now)
        .await
        .or_not_found("API key")
}

/// The active key behind a bearer token; its use is recorded.
pub async fn authenticate(ctx: &Ctx, key: &str) -> Result<KeyHolder> {
    let hash = api_key::hash(key);
    let holder = look_up(&ctx.store, key, &hash).await?;
    record_use(ctx, &holder).await;
    Ok(holder)
}

/// `authenticate` for a producer about to ingest, from this node's cache
/// when it has seen the key before. The caller passes the key's id on to
/// the write (`store::NewIngest::key_id`), which checks it is still
/// active: only there is a cached key as good as a looked-up one.
pub async fn producer(ctx: &Ctx, key: &str) -> Result<KeyHolder> {
    let hash = api_key::hash(key);
    let holder = match ctx.keys.get(&hash) {
        Some(holder) => holder,
        None => {
            let holder = look_up(&ctx.store, key, &hash).await?;
            ctx.keys.keep(hash, holder.clone());
            holder
        }
    };
    record_use(ctx, &holder).await;
    Ok(holder)
}

async fn look_up(store: &Store, key: &str, hash: &str) -> Result<KeyHolder> {
    let found = if key.starts_with(api_key::PLATFORM_KEY_PREFIX) {
        store
            .active_platform_key(hash)
            .await
            .map(KeyHolder::Platform)
    } else {
        store.active_api_key(hash).await.map(KeyHolder::Account)
    };
    match found {
        Ok(holder) => Ok(holder),
        Err(StoreError::NotFound) => Err(revoked()),
        Err(e) => Err(e.into()),
    }
}

/// What a caller with an unknown or revoked key is told.
pub fn revoked() -> Error {
    Error::Unauthorized("unknown or revoked API key".into())
}

async fn record_use(ctx: &Ctx, holder: &KeyHolder) {
    ctx.key_uses
        .record(
            &ctx.store,
            holder.is_platform(),
            holder.key_id(),
            ctx.clock.now(),
        )
        .await;
}

pub async fn user_by_email(store: &Store, email: &str) -> Result<User> {
    store.user_by_email(email).await.or_not_found("user")
}

/// An operator's reset: a new password (the rules apply) and every
/// session of the user ends.
pub async fn set_password(store: &Store, user_id: &str, password: String) -> Result<User> {
    let hash = password::hash_off_thread(password).await?;
    store
        .reset_password(user_id, &hash)
        .await
        .or_not_found("user")
}

/// Deletes the user; their sessions open nothing from then on.
pub async fn delete_user(store: &Store, user_id: &str) -> Result<()> {
    store.delete_user(user_id).await.or_not_found("user")
}

/// The user behind a session.
pub async fn user(store: &Store, user_id: &str) -> Result<User> {
    store.user(user_id).await.or_not_found("user")
}

/// A signed-in user and their account.
pub async fn user_and_account(store: &Store, user_id: &str) -> Result<(User, Account)> {
    let user = user(store, user_id).await?;
    let account = store
        .account(&user.account_id)
        .await
        .or_not_found("account")?;
    Ok((user, account))
}

/// The account's alert emails, newest first.
pub async fn notifications(store: &Store, account_id: &str) -> Result<Vec<Notification>> {
    Ok(store.notifications(account_id).await?)
}

/// The installation at a glance, for admins: each account's queue and
/// dead letters, and the delivery and dead-letter rates since `since`.
pub async fn installation(
    store: &Store,
    since: Timestamp,
) -> Result<(Vec<AccountOverview>, GlobalRates)> {
    Ok((
        store.accounts_overview().await?,
        store.global_rates(since).await?,
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn emails_are_normalized_and_checked() {
        assert_eq!(
            super::normalize_email(" A@B.example ").unwrap(),
            "a@b.example"
        );
        assert!(super::normalize_email("nobody").is_err());
        assert!(super::normalize_email("a b@c").is_err());
    }
}
