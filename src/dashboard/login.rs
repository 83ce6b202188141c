//! Sign in and out: plain form posts, answered with a redirect (POST, then
//! GET), so they work the same with and without JavaScript.

use std::sync::Arc;

use axum::{
    extract::State,
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
    Form,
};
use serde::Deserialize;
use tower_sessions::Session;

use crate::{
    accounts::{self, SignIn},
    auth::password,
    clock::Timestamp,
    context::Ctx,
    dashboard::{guard, portal, session::USER_ID_KEY},
    store::User,
};

#[derive(Deserialize)]
pub struct LoginIn {
    email: String,
    password: String,
    #[serde(default)]
    next: String,
}

/// Only a path on this site: one `/`, then only characters a URL path and
/// query may hold as they are. Browsers strip tabs and newlines and read
/// `\\` as `/`, so `/\t/evil.example` or `/\\evil.example` would leave the
/// site; anything else (and a newline, which no header may carry) goes to
/// the events page instead.
fn safe_next(next: &str) -> &str {
    let path_char = |c: char| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@/?%".contains(c);
    let one_slash = next.starts_with('/') && !next[1..].starts_with('/');
    let ok = one_slash && next.chars().all(path_char);
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
    let user =
        match accounts::sign_in(&ctx.store, &ctx.hashing, now, &form.email, form.password).await {
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
            SignIn::Busy => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [(header::RETRY_AFTER, "1")],
                    "Too many sign-ins at once. Try again in a second.",
                )
                    .into_response()
            }
            SignIn::Refused => return failed(&form.next),
        };
    if let Err(e) = start_session(&session, &user, now).await {
        tracing::error!(error = %e, "login: could not store session");
        return failed(&form.next);
    }
    tracing::info!(user = %user.id, "signed in");
    Redirect::to(safe_next(&form.next)).into_response()
}

/// Signs `user` into this browser's session, under a new session id: an
/// id planted before is worthless after.
pub async fn start_session(
    session: &Session,
    user: &User,
    now: Timestamp,
) -> Result<(), tower_sessions::session::Error> {
    session.cycle_id().await?;
    session.insert(USER_ID_KEY, &user.id).await?;
    guard::start_timeouts(session, now, user.session_epoch).await
}

pub async fn logout(State(ctx): State<Arc<Ctx>>, session: Session, headers: HeaderMap) -> Response {
    // Deletes the record server-side; the old cookie no longer opens anything.
    if let Err(e) = session.flush().await {
        tracing::error!(error = %e, "logout: could not delete session");
    }
    match portal::sign_out(&ctx, &headers).await {
        Some(cookie) => {
            let mut res = Redirect::to("/login").into_response();
            res.headers_mut().append(header::SET_COOKIE, cookie);
            res
        }
        None => Redirect::to("/login").into_response(),
    }
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
        assert_eq!(
            safe_next("/events/evt_1%2F2?x=%2F%2F"),
            "/events/evt_1%2F2?x=%2F%2F"
        );
        for hostile in [
            "/\t/evil.example",
            "/\t\t/evil.example",
            "/\n/evil.example",
            "/\r\n/evil.example",
            "/events\nSet-Cookie: x=1",
            "\\\\evil.example",
            "/\\/evil.example",
            "/\\evil.example",
            "///evil.example",
            "/ /evil.example",
            "/%09/evil.example\t",
            "\t//evil.example",
            " /events",
            "/events#\u{2028}",
            "/ｅvil",
            "javascript:alert(1)",
        ] {
            assert_eq!(safe_next(hostile), "/events", "{hostile:?}");
        }
        // Percent-encoded forms stay encoded in Location and so on this site.
        assert_eq!(safe_next("/%09/evil.example"), "/%09/evil.example");
        assert_eq!(safe_next("/%2F/evil.example"), "/%2F/evil.example");
        assert_eq!(safe_next("/%5Cevil.example"), "/%5Cevil.example");
    }
}
