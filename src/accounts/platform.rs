//! What a platform does with its key: onboard its customers as accounts
//! (named by Dakghar's id or the platform's own `external_id`), list,
//! rename and delete them. Platform keys themselves are made here too.

use crate::{
    auth::api_key,
    clock::Timestamp,
    error::{Error, OrNotFound, Result},
    ids,
    store::{Account, Deleted, PlatformKey, Store, StoreError},
};

/// The most accounts one page lists.
pub const MAX_PAGE: i64 = 100;

/// Names are what people read; external ids what programs match on.
fn check_name(name: &str) -> Result<String> {
    // Counted as sent, as the API's schema counts it; stored trimmed.
    let long = name.chars().count() > 200;
    let name = name.trim();
    if name.is_empty() || long || name.chars().any(char::is_control) {
        return Err(Error::invalid(
            "invalid_name",
            "name must be 1 to 200 characters, none of them control characters",
        ));
    }
    Ok(name.to_string())
}

/// `{account}` in a path is a Dakghar id or an external id, so an external
/// id must not look like a Dakghar id: it could name another account.
fn check_external_id(id: &str) -> Result<String> {
    let printable = id.bytes().all(|b| (b'!'..=b'~').contains(&b) && b != b'/');
    if id.is_empty() || id.len() > 255 || !printable {
        return Err(Error::invalid(
            "invalid_external_id",
            "external_id must be 1 to 255 printable ASCII characters without spaces or '/'",
        ));
    }
    let ours = format!("{}_", ids::ACCOUNT);
    if id.starts_with(&ours) {
        return Err(Error::invalid(
            "invalid_external_id",
            format!("external_id must not start with '{ours}': Dakghar's account ids do"),
        ));
    }
    Ok(id.to_string())
}

pub async fn create_account(
    store: &Store,
    name: &str,
    external_id: Option<&str>,
    now: Timestamp,
) -> Result<Account> {
    let name = check_name(name)?;
    let external_id = external_id.map(check_external_id).transpose()?;
    Ok(store
        .create_account_with(&name, external_id.as_deref(), now)
        .await?)
}

/// The account `reference` names: its id, else its external id.
pub async fn account(store: &Store, reference: &str) -> Result<Account> {
    store
        .account_by_ref(reference)
        .await
        .or_not_found("account")
}

/// A page of accounts, oldest first, and where the next one starts.
pub async fn accounts(
    store: &Store,
    after: Option<&(i64, String)>,
    limit: i64,
) -> Result<(Vec<Account>, Option<(i64, String)>)> {
    let mut page = store.accounts_page(after, limit + 1).await?;
    let more = page.len() as i64 > limit;
    page.truncate(usize::try_from(limit).unwrap_or(0));
    let next = more
        .then(|| page.last().map(|a| (a.created_at, a.id.clone())))
        .flatten();
    Ok((page, next))
}

/// Renames the account or changes its external id (`Some(None)` clears it).
pub async fn update_account(
    store: &Store,
    id: &str,
    name: Option<&str>,
    external_id: Option<Option<&str>>,
) -> Result<Account> {
    let name = name.map(check_name).transpose()?;
    let external_id = match external_id {
        Some(Some(e)) => Some(Some(check_external_id(e)?)),
        Some(None) => Some(None),
        None => None,
    };
    store
        .update_account(
            id,
            name.as_deref(),
            external_id.as_ref().map(|e| e.as_deref()),
        )
        .await
        .or_not_found("account")
}

/// Deletes the account and all of its data, a batch at a time.
pub async fn delete_account(store: &Store, id: &str) -> Result<Deleted> {
    // Batches take a while; they run to the end even if the caller goes away.
    let (store, owned) = (store.clone(), id.to_string());
    let gone = tokio::spawn(async move { store.delete_account(&owned).await })
        .await
        .map_err(|e| StoreError::Config(format!("the deletion stopped: {e}")))?
        .or_not_found("account")?;
    tracing::info!(
        account = %id,
        events = gone.events,
        deliveries = gone.deliveries,
        attempts = gone.attempts,
        "account deleted"
    );
    Ok(gone)
}

/// A new platform key; the whole key is in the answer, shown once.
pub async fn create_key(store: &Store, name: &str, now: Timestamp) -> Result<api_key::NewKey> {
    let name = super::key_use::checked_name(name)?;
    let key = api_key::generate_platform();
    store
        .create_platform_key(&name, &key.prefix, &key.hash, now)
        .await?;
    Ok(key)
}

pub async fn keys(store: &Store) -> Result<Vec<PlatformKey>> {
    Ok(store.list_platform_keys().await?)
}

pub async fn revoke_key(store: &Store, id: &str, now: Timestamp) -> Result<()> {
    store
        .revoke_platform_key(id, now)
        .await
        .or_not_found("platform key")
}
