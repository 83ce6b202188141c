//! Resolves the session (a user's, or a portal link's) to a `Viewer` and
//! keeps pages behind sign-in.

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
    dashboard::{
        portal,
        session::{SEEN_AT_KEY, SESSION_EPOCH_KEY, SIGNED_IN_AT_KEY, USER_ID_KEY},
    },
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

/// Stamps a new sign-in: for the timeouts, and the user's session epoch
/// (a password reset moves it on, ending the session).
pub async fn start_timeouts(
    session: &Session,
    now: Timestamp,
    epoch: i64,
) -> Result<(), tower_sessions::session::Error> {
    session.insert(SIGNED_IN_AT_KEY, now.millis()).await?;
    session.insert(SESSION_EPOCH_KEY, epoch).await?;
    session.insert(SEEN_AT_KEY, now.millis()).await
}

/// Puts who is signed in, if anyone, into the request's extensions, where
/// handlers and server functions find it: a user's session, else a portal
/// session. The user's wins, so nobody else's portal link can take over a
/// signed-in browser. Responses to portal sessions are marked frameable
/// for the embedding origins.
pub async fn load_viewer(
    State(ctx): State<Arc<Ctx>>,
    session: Session,
    mut req: Request,
    next: Next,
) -> Response {
    let viewer = match user_viewer(&ctx, &session).await {
        Some(v) => Some(v),
        None => portal::viewer(&ctx, req.headers()).await,
    };
    let frameable = viewer.as_ref().is_some_and(|v| v.portal);
    if let Some(viewer) = viewer {
        req.extensions_mut().insert(viewer);
    }
    let mut res = next.run(req).await;
    if frameable {
        res.extensions_mut().insert(Frameable);
    }
    res
}

async fn user_viewer(ctx: &Ctx, session: &Session) -> Option<Viewer> {
    let user_id = match session.get::<String>(USER_ID_KEY).await {
        Ok(id) => id?,
        Err(e) => {
            tracing::warn!(error = %e, "could not read session");
            return None;
        }
    };
    if !still_fresh(ctx, session).await {
        // Timed out: the record goes, so the old cookie opens nothing.
        tracing::info!("session timed out");
        let _ = session.flush().await;
        return None;
    }
    let user = match accounts::user(&ctx.store, &user_id).await {
        Ok(user) => user,
        Err(Error::NotFound(_)) => {
            // The user was deleted: the session means nothing any more.
            let _ = session.flush().await;
            return None;
        }
        Err(e) => {
            tracing::error!(error = %e, "could not load session user");
            return None;
        }
    };
    // Sessions from before a password reset are over.
    let epoch = session
        .get::<i64>(SESSION_EPOCH_KEY)
        .await
        .ok()
        .flatten()
        .unwrap_or(0);
    if epoch != user.session_epoch {
        tracing::info!(user = %user.id, "session ended by a password reset");
        let _ = session.flush().await;
        return None;
    }
    Some(Viewer {
        actor: format!("user:{}", user.id),
        is_admin: user.is_admin(),
        role: super::app_role(user.account_role),
        user_id: Some(user.id),
        account_id: user.account_id,
        return_url: None,
        portal: false,
    })
}

/// On a response: the viewer was a portal session, which the embedding
/// origins may show in a frame.
#[derive(Debug, Clone, Copy)]
pub struct Frameable;

/// Paths anyone may fetch: sign in, static assets, server functions and the
/// API (which answer 401 themselves), health and metrics.
fn is_public(path: &str) -> bool {
    path == "/login"
        || path == "/forgot-password"
        || path == "/healthz"
        || path == "/readyz"
        || path == "/metrics"
        || path == "/favicon.svg"
        || path == "/logo.svg"
        || path == "/logo.png"
        || [
            "/pkg/",
            "/api/",
            "/_fn/",
            "/portal/",
            "/invitations/",
            "/reset-password/",
        ]
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
