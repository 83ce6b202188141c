//! Portal sessions in the browser: opening a portal link at
//! `/portal/{token}`, the cookie that carries the session afterwards, and
//! signing out. The cookie is the portal's own: with `--embed-origins` it
//! is `SameSite=None; Secure; Partitioned`, so it works inside another
//! site's iframe, while the users' session cookie stays `Lax`.

use std::sync::Arc;

use app::model::Viewer;
use axum::{
    extract::{Path, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{Html, IntoResponse, Redirect, Response},
    Extension,
};

use super::guard::Frameable;
use crate::{accounts::portal, context::Ctx, error::Error};

pub const COOKIE: &str = "dakghar_portal";

/// `GET /portal/{token}`: once, signs this browser into the link's account.
/// A browser a user is signed into keeps its user and the link stays
/// unused: a link someone else made, opened by a click, must not swap the
/// account under them.
pub async fn open(
    State(ctx): State<Arc<Ctx>>,
    viewer: Option<Extension<Viewer>>,
    Path(token): Path<String>,
) -> Response {
    if viewer.is_some_and(|v| !v.portal) {
        return notice(
            &ctx,
            StatusCode::CONFLICT,
            "You are signed in",
            "This browser is signed in to your own account, so the link was not used. \
             Sign out, then open the link again.",
        );
    }
    let mut res = match portal::open(&ctx, &token).await {
        Ok((secret, session)) => {
            let max_age = ctx
                .clock
                .now()
                .until(crate::clock::Timestamp(session.expires_at));
            let mut res = Redirect::to("/events").into_response();
            if let Ok(cookie) = HeaderValue::from_str(&cookie(&ctx, &secret, max_age.as_secs())) {
                res.headers_mut().append(header::SET_COOKIE, cookie);
            }
            res
        }
        Err(Error::NotFound(_)) => unusable(&ctx),
        Err(e) => {
            tracing::error!(error = %e, "could not open a portal link");
            (StatusCode::SERVICE_UNAVAILABLE, "Try again in a moment.").into_response()
        }
    };
    // The link may be opened inside the platform's iframe: so may its answer.
    res.extensions_mut().insert(Frameable);
    res
}

/// The one answer to a link that was used, has expired, was altered or
/// never existed: nothing in it tells which.
fn unusable(ctx: &Ctx) -> Response {
    notice(
        ctx,
        StatusCode::GONE,
        "This link was used or has expired",
        "Each link opens the dashboard once, and only for a while. Ask for a new one \
         where you found this one.",
    )
}

/// A page with one message, before any session exists to render the app's.
fn notice(ctx: &Ctx, status: StatusCode, title: &str, text: &str) -> Response {
    let brand = escape(&ctx.config.brand.name);
    let page = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · {brand}</title>\
         <link rel=\"stylesheet\" href=\"/pkg/dakghar.css\"></head>\
         <body><main class=\"login\"><div class=\"card login-card\" data-testid=\"link-notice\">\
         <h1>{title}</h1><p>{text}</p></div></main></body></html>"
    );
    (status, Html(page)).into_response()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn cookie(ctx: &Ctx, secret: &str, max_age_s: u64) -> String {
    let attributes = if ctx.config.embed_origins.is_empty() {
        let secure = if ctx.config.secure_cookies {
            "; Secure"
        } else {
            ""
        };
        format!("SameSite=Lax{secure}")
    } else {
        // A third-party frame only sends a cookie marked so; Partitioned
        // keeps it to this embedding site (CHIPS).
        "SameSite=None; Secure; Partitioned".to_string()
    };
    format!("{COOKIE}={secret}; Path=/; HttpOnly; Max-Age={max_age_s}; {attributes}")
}

fn secret(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
        .filter(|v| !v.is_empty())
}

/// The portal session the request's cookie holds, as a viewer.
pub async fn viewer(ctx: &Ctx, headers: &HeaderMap) -> Option<Viewer> {
    let secret = secret(headers)?;
    match portal::session(&ctx.store, &secret, ctx.clock.now()).await {
        Ok(session) => Some(Viewer {
            actor: format!("portal:{}", session.link_id),
            user_id: None,
            account_id: session.account_id,
            is_admin: false,
            role: super::app_role(session.role),
            return_url: session.return_url,
            portal: true,
        }),
        Err(Error::NotFound(_)) => None,
        Err(e) => {
            tracing::error!(error = %e, "could not load a portal session");
            None
        }
    }
}

/// Ends the request's portal session, if it has one; returns the cookie
/// that clears it in the browser.
pub async fn sign_out(ctx: &Ctx, headers: &HeaderMap) -> Option<HeaderValue> {
    let secret = secret(headers)?;
    if let Err(e) = portal::close(&ctx.store, &secret).await {
        tracing::error!(error = %e, "could not end a portal session");
    }
    HeaderValue::from_str(&cookie(ctx, "", 0)).ok()
}
