//! Forgotten passwords: a single-use link valid 30 minutes, the same
//! answer whether the email is known or not, throttled per email like
//! signing in; using it ends every session of the user.

use std::time::Duration;

use super::{links, normalize_email};
use crate::{
    auth::{password, throttle},
    context::Ctx,
    error::{Error, Result},
    jobs::alerts::texts,
    store::{LinkKind, NewLink, StoreError, User},
};

pub const RESET_TTL: Duration = Duration::from_secs(30 * 60);

/// What the page says after a request: nothing that tells whether the
/// email has an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetRequest {
    /// "If the email has an account, a link is on its way."
    Accepted,
    /// Too many requests for this email (known or not): wait this long.
    Throttled { wait_s: u64 },
}

/// The throttle's key for reset requests, apart from failed sign-ins.
fn throttle_key(email: &str) -> String {
    format!("reset:{email}")
}

pub async fn request_reset(ctx: &Ctx, email: &str) -> Result<ResetRequest> {
    // Not an address at all: the same answer, nothing to send.
    let Ok(email) = normalize_email(email) else {
        return Ok(ResetRequest::Accepted);
    };
    let now = ctx.clock.now();
    let key = throttle_key(&email);
    // Every request counts, known email or not, so both throttle alike;
    // counted and checked in one statement, so a burst cannot slip past.
    let counted = ctx
        .store
        .reserve_login_attempt(&key, now, throttle::FORGET_AFTER, throttle::lock_after)
        .await?;
    if counted.is_none() {
        let until = ctx.store.login_locked_until(&key, now).await?;
        return Ok(ResetRequest::Throttled {
            wait_s: until.map_or(1, |u| now.until(u).as_secs().max(1)),
        });
    }
    let user = match ctx.store.user_by_email(&email).await {
        Ok(user) => user,
        Err(StoreError::NotFound) => return Ok(ResetRequest::Accepted),
        Err(e) => return Err(e.into()),
    };
    let (secret, hash) = links::new_secret();
    let new = NewLink {
        kind: LinkKind::PasswordReset,
        account_id: &user.account_id,
        user_id: Some(&user.id),
        email: Some(&user.email),
        role: None,
        return_url: None,
        created_by: "self",
        expires_at: now.plus(RESET_TTL),
    };
    let link = ctx.store.create_link(&new, &hash, now).await?;
    let url = ctx.public_url(&format!("/reset-password/{}", links::token(&link, &secret)));
    texts::password_reset(&ctx.config.brand.name, &url, link.expires_at)
        .write_to(&ctx.store, &user.account_id, &user.email, now)
        .await?;
    ctx.mail_now();
    tracing::info!(user = %user.id, "password reset requested");
    Ok(ResetRequest::Accepted)
}

/// Sets the new password the reset link allows; every session the user
/// had is over.
pub async fn reset_password(ctx: &Ctx, token: &str, new_password: String) -> Result<User> {
    let now = ctx.clock.now();
    let link = links::check(&ctx.store, token, LinkKind::PasswordReset, now).await?;
    let hash = password::hash_off_thread(new_password).await?;
    let user = match ctx.store.use_password_reset(&link.id, &hash, now).await {
        Ok(user) => user,
        Err(StoreError::NotFound) => return Err(Error::NotFound(links::UNUSABLE)),
        Err(e) => return Err(e.into()),
    };
    if let Err(e) = ctx.store.clear_login_failures(&user.email).await {
        tracing::warn!(error = %e, "could not clear failed sign-ins after a reset");
    }
    tracing::info!(user = %user.id, "password reset; other sessions ended");
    Ok(user)
}
