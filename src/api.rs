//! The REST API (SPEC §9): JSON in and out, `Authorization: Bearer <api key>`,
//! every query scoped to the caller's account.

pub(crate) mod admin;
mod caller;
pub(crate) mod endpoints;
pub mod error;
pub mod events;
mod ingest_body;
pub mod openapi;

use axum::{
    routing::{get, post},
    Router,
};

use crate::context::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/endpoints",
            post(endpoints::create).get(endpoints::list),
        )
        .route(
            "/api/v1/endpoints/{id}",
            get(endpoints::get_one)
                .patch(endpoints::patch)
                .delete(endpoints::delete),
        )
        .route("/api/v1/endpoints/{id}/pause", post(endpoints::pause))
        .route("/api/v1/endpoints/{id}/resume", post(endpoints::resume))
        .route("/api/v1/endpoints/{id}/health", get(endpoints::health))
        .route(
            "/api/v1/endpoints/{id}/rotate-secret",
            post(endpoints::rotate_secret),
        )
        .route("/api/v1/events", post(events::ingest).get(events::list))
        .route("/api/v1/events/{id}", get(events::get_one))
        .route("/api/v1/deliveries/{id}/resend", post(events::resend))
        .route(
            "/api/v1/admin/replays",
            post(admin::create).get(admin::list),
        )
        .route("/api/v1/admin/replays/{id}", get(admin::get_one))
        .route("/api/v1/admin/replays/{id}/cancel", post(admin::cancel))
        .route("/api/openapi.json", get(openapi::document))
}
