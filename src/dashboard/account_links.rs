//! The forms behind single-use links: "Forgot password?", choosing a new
//! password from a reset link, and accepting an invitation. Plain form
//! posts answered with a redirect, like signing in, so they work with
//! JavaScript off; the pages (in `app`) show what the query says.

use std::sync::Arc;

use axum::{
    extract::{Path, State},
    response::{IntoResponse, Redirect, Response},
    Form,
};
use serde::Deserialize;
use tower_sessions::Session;

use super::login::start_session;
use crate::{
    accounts::{
        password_reset::{self, ResetRequest},
        team,
    },
    auth::password::PasswordError,
    context::Ctx,
    error::Error,
};

#[derive(Deserialize)]
pub struct EmailIn {
    email: String,
}

#[derive(Deserialize)]
pub struct PasswordIn {
    password: String,
}

fn back(path: &str, query: &str) -> Response {
    Redirect::to(&format!("{path}?{query}")).into_response()
}

fn encoded(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The same answer whether the email has an account or not.
pub async fn forgot_password(State(ctx): State<Arc<Ctx>>, Form(form): Form<EmailIn>) -> Response {
    match password_reset::request_reset(&ctx, &form.email).await {
        Ok(ResetRequest::Accepted) => back("/forgot-password", "sent=1"),
        Ok(ResetRequest::Throttled { wait_s }) => back(
            "/forgot-password",
            &format!("error=throttled&wait={wait_s}"),
        ),
        Err(e) => {
            tracing::error!(error = %e, "password reset request failed");
            back("/forgot-password", "error=unavailable")
        }
    }
}

/// Why a link's form went back to its page: a code the page puts in
/// words, never text of ours in the URL.
fn refused(path: &str, e: Error) -> Response {
    match e {
        Error::NotFound(_) => back(path, "error=unusable"),
        Error::Password(PasswordError::TooShort) => back(path, "error=short"),
        Error::Password(PasswordError::TooLong) => back(path, "error=long"),
        Error::Conflict(_) => back(path, "error=taken"),
        e => {
            tracing::error!(error = %e, "a link's form failed");
            back(path, "error=unavailable")
        }
    }
}

/// A new password; every session of the user ends, and they sign in again.
pub async fn reset_password(
    State(ctx): State<Arc<Ctx>>,
    Path(token): Path<String>,
    Form(form): Form<PasswordIn>,
) -> Response {
    match password_reset::reset_password(&ctx, &token, form.password).await {
        Ok(_) => Redirect::to("/login?reset=1").into_response(),
        Err(e) => refused(&format!("/reset-password/{}", encoded(&token)), e),
    }
}

/// The invitee chooses a password and is signed in at once.
pub async fn accept_invitation(
    State(ctx): State<Arc<Ctx>>,
    session: Session,
    Path(token): Path<String>,
    Form(form): Form<PasswordIn>,
) -> Response {
    let here = format!("/invitations/{}", encoded(&token));
    let user = match team::accept_invitation(&ctx, &token, form.password).await {
        Ok(user) => user,
        Err(e) => return refused(&here, e),
    };
    if let Err(e) = start_session(&session, &user, ctx.clock.now()).await {
        tracing::error!(error = %e, "could not sign in an invitee");
        return Redirect::to("/login").into_response();
    }
    Redirect::to("/events").into_response()
}
