//! The REST API (SPEC §9, §10): JSON in and out, `Authorization: Bearer
//! <api key>`, every query scoped to the account the caller acts on.

mod accounts;
pub(crate) mod admin;
mod caller;
pub(crate) mod endpoints;
pub mod error;
pub mod events;
mod ingest_body;
mod json_body;
pub mod openapi;
mod schemas;

use std::sync::LazyLock;

use axum::{routing::get, Router};
use utoipa::OpenApi;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::context::AppState;

/// The routes that act on one account: at `/api/v1/…` with the account's
/// own key, and at `/api/v1/accounts/{account}/…` with a platform key.
fn account_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(endpoints::create, endpoints::list))
        .routes(routes!(
            endpoints::get_one,
            endpoints::patch,
            endpoints::delete
        ))
        .routes(routes!(endpoints::pause))
        .routes(routes!(endpoints::resume))
        .routes(routes!(endpoints::queue))
        .routes(routes!(endpoints::discard_queue))
        .routes(routes!(endpoints::health))
        .routes(routes!(endpoints::rotate_secret))
        .routes(routes!(events::ingest, events::list))
        .routes(routes!(events::get_one))
        .routes(routes!(events::resend))
}

/// Where a platform key reaches an account's routes.
const FOR_ACCOUNT: &str = "/api/v1/accounts/{account}";

/// Every route of the REST API, declared once: each is mounted from its
/// handler's `#[utoipa::path]`, which also documents it.
fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .nest("/api/v1", account_routes())
        .nest(FOR_ACCOUNT, account_routes())
        .routes(routes!(accounts::create, accounts::list))
        .routes(routes!(
            accounts::get_one,
            accounts::patch,
            accounts::delete
        ))
        .routes(routes!(accounts::invite))
        .routes(routes!(accounts::portal_session))
        .routes(routes!(admin::create, admin::list))
        .routes(routes!(admin::get_one))
        .routes(routes!(admin::cancel))
}

/// The OpenAPI document of exactly the routes `router` mounts.
pub fn document() -> &'static utoipa::openapi::OpenApi {
    static DOCUMENT: LazyLock<utoipa::openapi::OpenApi> = LazyLock::new(|| {
        let mut doc = routes().split_for_parts().1;
        openapi::name_operations(&mut doc, FOR_ACCOUNT);
        openapi::document_failures(&mut doc);
        openapi::link_operations(&mut doc);
        doc
    });
    &DOCUMENT
}

/// The document as served. utoipa 5.5 writes a link's `operationId` in
/// snake case (`operation_id`), which no client reads: renamed here.
pub fn document_json() -> &'static serde_json::Value {
    static JSON: LazyLock<serde_json::Value> = LazyLock::new(|| {
        let mut doc = serde_json::to_value(document()).unwrap_or_default();
        openapi::spell_links(&mut doc);
        doc
    });
    &JSON
}

pub fn router() -> Router<AppState> {
    let (router, _) = routes().split_for_parts();
    router.route(
        "/api/openapi.json",
        get(|| async { axum::Json(document_json().clone()) }),
    )
}
