//! The REST API as an OpenAPI 3.1 document: what is said of the API as a
//! whole here, the operations from the handlers' annotations as `api.rs`
//! mounts them, the schemas from the request and response types.

use utoipa::{
    openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
    Modify, OpenApi,
};

use super::error;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Dakghar",
        description = "Webhook delivery: send events, manage endpoints, inspect and resend deliveries. \
                       Authenticate with `Authorization: Bearer <api key>`."
    ),
    components(schemas(error::ErrorOut)),
    modifiers(&BearerKey),
    tags(
        (name = "events", description = "Send events and follow their deliveries"),
        (name = "endpoints", description = "Where events are delivered"),
        (name = "admin", description = "Bulk replay and the audit log (admin keys only)"),
    )
)]
pub struct ApiDoc;

struct BearerKey;

impl Modify for BearerKey {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key from the dashboard or `dakghar api-key create`",
                    ))
                    .build(),
            ),
        );
    }
}

/// (method, path, summary) of every operation, for the docs page.
pub fn operations() -> Vec<(String, String, String)> {
    let doc = super::document();
    let mut out = Vec::new();
    for (path, item) in &doc.paths.paths {
        let ops = [
            ("GET", &item.get),
            ("POST", &item.post),
            ("PATCH", &item.patch),
            ("DELETE", &item.delete),
            ("PUT", &item.put),
        ];
        for (method, op) in ops
            .into_iter()
            .filter_map(|(m, op)| op.as_ref().map(|op| (m, op)))
        {
            out.push((
                method.to_string(),
                path.clone(),
                op.summary.clone().unwrap_or_default(),
            ));
        }
    }
    out
}
