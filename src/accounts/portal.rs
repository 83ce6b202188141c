//! Portal links (SPEC §10): a platform asks for a single-use URL that
//! signs a browser into one account with a role until a ttl, without a
//! user. Portal sessions see the customer's events and endpoints, never
//! admin pages, API keys or the team.

use std::time::Duration;

use super::links;
use crate::{
    auth::api_key,
    clock::Timestamp,
    context::Ctx,
    error::{Error, Result},
    store::{AccountRole, LinkKind, NewLink, PortalSession, Store, StoreError},
};

pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
const MIN_TTL: Duration = Duration::from_secs(60);

/// A link to hand to the customer's browser.
#[derive(Debug, Clone)]
pub struct PortalLink {
    pub url: String,
    pub expires_at: Timestamp,
}

/// `return_url`, if given, must be an absolute http(s) URL: the header's
/// "Back to …" link leads there.
pub fn check_return_url(raw: &str) -> Result<String> {
    let bad = |m: &str| Error::invalid("invalid_return_url", m);
    if raw.len() > 2048 {
        return Err(bad("return_url is longer than 2048 characters"));
    }
    let url = url::Url::parse(raw).map_err(|_| bad("return_url is not an absolute URL"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(bad("return_url must be an http or https URL with a host"));
    }
    Ok(url.to_string())
}

pub async fn create_link(
    ctx: &Ctx,
    account_id: &str,
    role: AccountRole,
    ttl: Duration,
    return_url: Option<&str>,
    actor: &str,
) -> Result<PortalLink> {
    if role == AccountRole::Owner {
        return Err(Error::invalid(
            "invalid_role",
            "a portal session is a developer or a viewer",
        ));
    }
    if !(MIN_TTL..=MAX_TTL).contains(&ttl) {
        return Err(Error::invalid(
            "invalid_ttl",
            "ttl must be between 1 minute and 7 days, such as 1h",
        ));
    }
    let return_url = return_url.map(check_return_url).transpose()?;
    let now = ctx.clock.now();
    let (secret, hash) = links::new_secret();
    let new = NewLink {
        kind: LinkKind::Portal,
        account_id,
        user_id: None,
        email: None,
        role: Some(role),
        return_url: return_url.as_deref(),
        created_by: actor,
        expires_at: now.plus(ttl),
    };
    let link = ctx.store.create_link(&new, &hash, now).await?;
    Ok(PortalLink {
        url: ctx.public_url(&format!("/portal/{}", links::token(&link, &secret))),
        expires_at: Timestamp(link.expires_at),
    })
}

/// Opens the portal link once: returns the session's secret (for the
/// browser's cookie) and the session. Used, expired, altered and unknown
/// links are all the same `NotFound`.
pub async fn open(ctx: &Ctx, token: &str) -> Result<(String, PortalSession)> {
    let now = ctx.clock.now();
    let link = links::check(&ctx.store, token, LinkKind::Portal, now).await?;
    let (secret, hash) = links::new_secret();
    match ctx.store.open_portal(&link.id, &hash, now).await {
        Ok(session) => {
            tracing::info!(link = %link.id, account = %link.account_id, "portal link opened");
            Ok((secret, session))
        }
        Err(StoreError::NotFound) => Err(Error::NotFound(links::UNUSABLE)),
        Err(e) => Err(e.into()),
    }
}

/// The portal session a browser's cookie holds, while it lasts.
pub async fn session(store: &Store, secret: &str, now: Timestamp) -> Result<PortalSession> {
    store
        .portal_session(&api_key::hash(secret), now)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => Error::NotFound("portal session"),
            e => e.into(),
        })
}

/// Signing out of a portal session ends it.
pub async fn close(store: &Store, secret: &str) -> Result<()> {
    Ok(store.end_portal_session(&api_key::hash(secret)).await?)
}
