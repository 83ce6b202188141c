//! Sign in and out: plain form posts, answered with a redirect (POST, then
//! GET), so they work the same with and without JavaScript.

use std::sync::Arc;

use axum::{
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
    Form,
};
use serde::Deserialize;
use tower_sessions::Session;

use crate::{
    auth::{password, throttle},
    context::Ctx,
    dashboard::{guard, session::USER_ID_KEY},
    store::StoreError,
};

#[derive(Deserialize)]
pub struct LoginIn {
    email: String,
    password: String,
    #[serde(default)]
    next: String,
}

/// Only same-site paths: `//evil.example` and absolute URLs are refused.
fn safe_next(next: &str) -> &str {
    let ok = next.starts_with('/') && !next.starts_with("//") && !next.starts_with("/\\");
    if ok && next != "/login" && !next.starts_with("/login?") {
        next
    } else {
        "/events"
    }
}

fn failed(next: &str) -> Response {
    back_to_login("error=1", next)
}

fn back_to_login(query: &str, next: &str) -> Response {
    let mut target = format!("/login?{query}");
    if !next.is_empty() {
        target.push_str("&next=");
        target.extend(url::form_urlencoded::byte_serialize(next.as_bytes()));
    }
    Redirect::to(&target).into_response()
}

pub async fn login(
    State(ctx): State<Arc<Ctx>>,
    session: Session,
    Form(form): Form<LoginIn>,
) -> Response {
    // Refused before any hashing: a megabyte password costs nothing.
    if form.password.len() > password::MAX_PASSWORD_BYTES {
        return (
            StatusCode::BAD_REQUEST,
            format!(
                "Passwords are at most {} bytes.",
                password::MAX_PASSWORD_BYTES
            ),
        )
            .into_response();
    }
    let email = form.email.trim().to_lowercase();
    let now = ctx.clock.now();
    match ctx.store.login_locked_until(&email, now).await {
        Ok(None) => {}
        Ok(Some(until)) => {
            let wait_s = now.until(until).as_secs().max(1);
            tracing::warn!(wait_s, "login throttled");
            return back_to_login(&format!("error=throttled&wait={wait_s}"), &form.next);
        }
        Err(e) => {
            tracing::error!(error = %e, "login: could not read failed sign-ins");
            return failed(&form.next);
        }
    }
    let user = match ctx.store.user_by_email(&email).await {
        Ok(u) => Some(u),
        Err(StoreError::NotFound) => None,
        Err(e) => {
            tracing::error!(error = %e, "login: could not look up user");
            return failed(&form.next);
        }
    };
    // Unknown emails are verified against a dummy hash: same answer, same time.
    let ok = password::verify(
        form.password.clone(),
        user.as_ref().map(|u| u.password_hash.clone()),
    )
    .await;
    let user = match (ok, user) {
        (true, Some(user)) => user,
        _ => {
            let failures = ctx
                .store
                .record_login_failure(&email, now, throttle::FORGET_AFTER, throttle::lock_after)
                .await;
            match failures {
                Ok(n) => tracing::info!(failures_in_a_row = n, "login failed"),
                Err(e) => tracing::error!(error = %e, "login failed and could not be counted"),
            }
            return failed(&form.next);
        }
    };
    if let Err(e) = ctx.store.clear_login_failures(&email).await {
        tracing::warn!(error = %e, "login: could not clear failed sign-ins");
    }
    if password::needs_rehash(&user.password_hash) {
        rehash(&ctx, &user.id, form.password).await;
    }
    // A new id at sign-in: a session id planted before login is worthless after.
    if let Err(e) = session.cycle_id().await {
        tracing::error!(error = %e, "login: could not cycle session id");
        return failed(&form.next);
    }
    let stored = match session.insert(USER_ID_KEY, &user.id).await {
        Ok(()) => guard::start_timeouts(&session, now).await,
        Err(e) => Err(e),
    };
    if let Err(e) = stored {
        tracing::error!(error = %e, "login: could not store session");
        return failed(&form.next);
    }
    tracing::info!(user = %user.id, "signed in");
    Redirect::to(safe_next(&form.next)).into_response()
}

/// Moves a hash made with older argon2 parameters to today's; sign-in goes
/// on whatever happens here.
async fn rehash(ctx: &Ctx, user_id: &str, password: String) {
    match password::hash_off_thread(password).await {
        Ok(hash) => match ctx.store.set_password(user_id, &hash).await {
            Ok(()) => tracing::info!(user = %user_id, "password rehashed with current parameters"),
            Err(e) => tracing::warn!(error = %e, "could not store the rehashed password"),
        },
        // A password set before today's length rules: keep the old hash.
        Err(e) => tracing::warn!(error = %e, "could not rehash password"),
    }
}

pub async fn logout(session: Session) -> Response {
    // Deletes the record server-side; the old cookie no longer opens anything.
    if let Err(e) = session.flush().await {
        tracing::error!(error = %e, "logout: could not delete session");
    }
    Redirect::to("/login").into_response()
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next("/events?state=failed"), "/events?state=failed");
        assert_eq!(safe_next("//evil.example/x"), "/events");
        assert_eq!(safe_next("https://evil.example"), "/events");
        assert_eq!(safe_next("/\\evil.example"), "/events");
        assert_eq!(safe_next(""), "/events");
        assert_eq!(safe_next("/login?error=1"), "/events");
    }
}
