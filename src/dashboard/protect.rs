//! Browser-facing protections: cross-site form posts refused, and security
//! headers on every response.

use std::sync::{Arc, LazyLock};

use axum::{
    extract::{Request, State},
    http::{header, HeaderValue, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};
use leptos::prelude::use_context;

use super::guard::Frameable;

/// Scripts only from here and the wasm module, plus, on pages Leptos
/// renders, the inline hydration scripts carrying that response's nonce.
fn policy(nonce: Option<&str>) -> String {
    let inline = nonce.map(|n| format!(" 'nonce-{n}'")).unwrap_or_default();
    format!(
        "default-src 'self'; script-src 'self'{inline} 'wasm-unsafe-eval'; \
         style-src 'self'; style-src-attr 'unsafe-inline'; img-src 'self' data:; \
         connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
         frame-ancestors 'none'"
    )
}

/// Everything else (JSON, assets, error pages) gets no inline script at all.
static DEFAULT_POLICY: LazyLock<HeaderValue> =
    LazyLock::new(|| HeaderValue::from_str(&policy(None)).expect("the policy is plain ASCII"));

/// Called while Leptos renders a page: its nonce goes into the header.
pub fn set_page_policy() {
    let nonce = leptos::nonce::use_nonce();
    let response = use_context::<leptos_axum::ResponseOptions>();
    if let (Some(nonce), Some(response)) = (nonce, response) {
        if let Ok(value) = HeaderValue::from_str(&policy(Some(&nonce))) {
            response.insert_header(header::CONTENT_SECURITY_POLICY, value);
        }
    }
}

/// Every response: a CSP (pages set their own, with a nonce), no sniffing,
/// no framing. A response to a portal session may be framed by the
/// `--embed-origins`, and only by them; without any, nothing may frame it.
pub async fn security_headers(
    State(embed_origins): State<Arc<Vec<String>>>,
    req: Request,
    next: Next,
) -> Response {
    let mut res = next.run(req).await;
    let frameable = res.extensions().get::<Frameable>().is_some() && !embed_origins.is_empty();
    let headers = res.headers_mut();
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert_with(|| DEFAULT_POLICY.clone());
    if frameable {
        let policy = headers
            .get(header::CONTENT_SECURITY_POLICY)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .replace(
                "frame-ancestors 'none'",
                &format!("frame-ancestors {}", embed_origins.join(" ")),
            );
        if let Ok(value) = HeaderValue::from_str(&policy) {
            headers.insert(header::CONTENT_SECURITY_POLICY, value);
        }
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // X-Frame-Options has no allow-list; frame-ancestors says who may.
    if !frameable {
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    res
}

/// A state-changing request another site's page made (a forged form post,
/// a login CSRF) is refused before any handler runs. The REST API is exempt:
/// it authenticates with bearer keys a browser never attaches by itself,
/// and its admin routes, which also take sessions, check for themselves.
pub async fn refuse_cross_site(req: Request, next: Next) -> Response {
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if safe || req.uri().path().starts_with("/api/") || !app::port::is_cross_site(req.headers()) {
        return next.run(req).await;
    }
    tracing::warn!(path = %req.uri().path(), "cross-site request refused");
    (
        StatusCode::FORBIDDEN,
        "Refused: this request came from another site.",
    )
        .into_response()
}
