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
    accounts::{self, SignIn},
    auth::password,
    context::Ctx,
    dashboard::{guard, session::USER_ID_KEY},
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
    let now = ctx.clock.now();
    let user = match accounts::sign_in(&ctx.store, now, &form.email, form.password).await {
        SignIn::Welcome(user) => user,
        SignIn::TooLong => {
            return (
                StatusCode::BAD_REQUEST,
                format!(
                    "Passwords are at most {} bytes.",
                    password::MAX_PASSWORD_BYTES
                ),
            )
                .into_response()
        }
        SignIn::Throttled { wait_s } => {
            return back_to_login(&format!("error=throttled&wait={wait_s}"), &form.next)
        }
        SignIn::Refused => return failed(&form.next),
    };
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
