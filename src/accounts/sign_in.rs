//! Signing in with an email and a password: the throttle, the same answer
//! and the same argon2 work for an unknown email as for a wrong password,
//! and a hash made with older parameters replaced while the password is at
//! hand. The session is the dashboard's business.

use crate::{
    auth::{password, throttle},
    clock::Timestamp,
    store::{Store, StoreError, User},
};

#[derive(Debug)]
pub enum SignIn {
    Welcome(User),
    /// Refused before any hashing: a megabyte password costs nothing.
    TooLong,
    /// Too many failures for this email; try again in this many seconds.
    Throttled {
        wait_s: u64,
    },
    /// Every core is checking a password and the queue is full: try again
    /// in a second. Nothing was counted.
    Busy,
    /// A wrong email or password, or the database failed: the same
    /// answer either way.
    Refused,
}

/// Longer than any email address can be (RFC 5321's 254).
pub const MAX_EMAIL_BYTES: usize = 254;

pub async fn sign_in(
    store: &Store,
    gate: &password::Gate,
    now: Timestamp,
    email: &str,
    password: String,
) -> SignIn {
    if password.len() > password::MAX_PASSWORD_BYTES {
        return SignIn::TooLong;
    }
    let email = email.trim().to_lowercase();
    if email.len() > MAX_EMAIL_BYTES {
        return SignIn::Refused;
    }
    // A turn to hash first: a flood is turned away here, before it costs a
    // write or counts against anyone's email.
    let Ok(turn) = gate.try_permit().await else {
        tracing::warn!("login: every core is checking a password; answered busy");
        return SignIn::Busy;
    };
    // The attempt counts as a failure before the password is checked, in
    // the statement that checks the lock: concurrent attempts cannot all
    // pass a lock that none of them has counted towards yet.
    let counted = store
        .reserve_login_attempt(&email, now, throttle::FORGET_AFTER, throttle::lock_after)
        .await;
    let failures = match counted {
        Ok(Some(n)) => n,
        Ok(None) => {
            let until = store.login_locked_until(&email, now).await.ok().flatten();
            let wait_s = until.map_or(1, |u| now.until(u).as_secs().max(1));
            tracing::warn!(wait_s, "login throttled");
            return SignIn::Throttled { wait_s };
        }
        Err(e) => {
            tracing::error!(error = %e, "login: could not count the attempt");
            return SignIn::Refused;
        }
    };
    let user = match store.user_by_email(&email).await {
        Ok(u) => Some(u),
        Err(StoreError::NotFound) => None,
        Err(e) => {
            tracing::error!(error = %e, "login: could not look up user");
            return SignIn::Refused;
        }
    };
    // Unknown emails are verified against a dummy hash: same answer, same time.
    let ok = password::verify(
        turn,
        password.clone(),
        user.as_ref().map(|u| u.password_hash.clone()),
    )
    .await;
    let user = match (ok, user) {
        (true, Some(user)) => user,
        _ => {
            tracing::info!(failures_in_a_row = failures, "login failed");
            return SignIn::Refused;
        }
    };
    if let Err(e) = store.clear_login_failures(&email).await {
        tracing::warn!(error = %e, "login: could not clear failed sign-ins");
    }
    if password::needs_rehash(&user.password_hash) {
        rehash(store, &user.id, password).await;
    }
    SignIn::Welcome(user)
}

/// Moves a hash made with older argon2 parameters to today's; sign-in goes
/// on whatever happens here.
async fn rehash(store: &Store, user_id: &str, password: String) {
    match password::hash_off_thread(password).await {
        Ok(hash) => match store.set_password(user_id, &hash).await {
            Ok(()) => tracing::info!(user = %user_id, "password rehashed with current parameters"),
            Err(e) => tracing::warn!(error = %e, "could not store the rehashed password"),
        },
        // A password set before today's length rules: keep the old hash.
        Err(e) => tracing::warn!(error = %e, "could not rehash password"),
    }
}
