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

use crate::{auth::session::USER_ID_KEY, store::StoreError, web::Ctx};

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
    if let Some(user_id) = user_id {
        match ctx.store.user(&user_id).await {
            Ok(user) => {
                req.extensions_mut().insert(Viewer {
                    is_admin: user.is_admin(),
                    user_id: user.id,
                    account_id: user.account_id,
                });
            }
            Err(StoreError::NotFound) => {
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
