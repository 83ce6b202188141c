//! Resolves the session to a `Viewer` and keeps pages behind sign-in.

use std::sync::Arc;

use app::model::Viewer;
use axum::{
    extract::{Request, State},
    http::Method,
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};
use tower_sessions::Session;

use crate::{
    accounts,
    clock::Timestamp,
    context::Ctx,
    dashboard::session::{SEEN_AT_KEY, SIGNED_IN_AT_KEY, USER_ID_KEY},
    error::Error,
};

/// `seen_at` is rewritten at most this often: a session write per page
/// view would cost a database write on every click.
const SEEN_AT_GRANULARITY_MS: i64 = 60_000;

/// Whether the session is past its idle or absolute timeout; refreshes
/// `seen_at` when it is still alive.
async fn still_fresh(ctx: &Ctx, session: &Session) -> bool {
    let now = ctx.clock.now().millis();
    let limits = ctx.config.sessions;
    let millis = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let signed_in = session.get::<i64>(SIGNED_IN_AT_KEY).await.ok().flatten();
    let seen = session.get::<i64>(SEEN_AT_KEY).await.ok().flatten();
    let (Some(signed_in), Some(seen)) = (signed_in, seen) else {
        return false;
    };
    if now.saturating_sub(signed_in) > millis(limits.max_age)
        || now.saturating_sub(seen) > millis(limits.idle)
    {
        return false;
    }
    if now.saturating_sub(seen) >= SEEN_AT_GRANULARITY_MS {
        if let Err(e) = session.insert(SEEN_AT_KEY, now).await {
            tracing::warn!(error = %e, "could not refresh session");
        }
    }
    true
}

/// Stamps a new sign-in for the timeouts.
pub async fn start_timeouts(
    session: &Session,
    now: Timestamp,
) -> Result<(), tower_sessions::session::Error> {
    session.insert(SIGNED_IN_AT_KEY, now.millis()).await?;
    session.insert(SEEN_AT_KEY, now.millis()).await
}

/// Puts the signed-in user, if any, into the request's extensions, where
/// handlers and server functions find it.
pub async fn load_viewer(
    State(ctx): State<Arc<Ctx>>,
    session: Session,
    mut req: Request,
    next: Next,
) -> Response {
    let user_id = match session.get::<String>(USER_ID_KEY).await {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!(error = %e, "could not read session");
            None
        }
    };
    let user_id = match user_id {
        Some(id) if still_fresh(&ctx, &session).await => Some(id),
        Some(_) => {
            // Timed out: the record goes, so the old cookie opens nothing.
            tracing::info!("session timed out");
            let _ = session.flush().await;
            None
        }
        None => None,
    };
    if let Some(user_id) = user_id {
        match accounts::user(&ctx.store, &user_id).await {
            Ok(user) => {
                req.extensions_mut().insert(Viewer {
                    is_admin: user.is_admin(),
                    user_id: user.id,
                    account_id: user.account_id,
                });
            }
            Err(Error::NotFound(_)) => {
                // The user was deleted: the session means nothing any more.
                let _ = session.flush().await;
            }
            Err(e) => tracing::error!(error = %e, "could not load session user"),
        }
    }
    next.run(req).await
}

/// Paths anyone may fetch: sign in, static assets, server functions and the
/// API (which answer 401 themselves), health and metrics.
fn is_public(path: &str) -> bool {
    path == "/login"
        || path == "/healthz"
        || path == "/metrics"
        || path == "/favicon.svg"
        || ["/pkg/", "/api/", "/_fn/"]
            .iter()
            .any(|p| path.starts_with(p))
}

pub async fn require_session_for_pages(req: Request, next: Next) -> Response {
    let signed_in = req.extensions().get::<Viewer>().is_some();
    let is_page = matches!(*req.method(), Method::GET | Method::HEAD);
    if signed_in || !is_page || is_public(req.uri().path()) {
        return next.run(req).await;
    }
    let wanted = req
        .uri()
        .path_and_query()
        .map(|pq| pq.as_str())
        .unwrap_or("/");
    let target = format!(
        "/login?next={}",
        url::form_urlencoded::byte_serialize(wanted.as_bytes()).collect::<String>()
    );
    Redirect::to(&target).into_response()
}
