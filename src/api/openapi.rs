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
        (name = "accounts", description = "A platform's customers, their members and portal links (platform keys only)"),
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

/// Gives every operation an id of its own (handlers of several modules
/// share names: `create`, `list`): its tag before the handler's name. The
/// account routes mounted again under `prefix` for platform keys name the
/// `{account}` they act on, and end their ids in `_for_account`.
pub fn name_operations(doc: &mut utoipa::openapi::OpenApi, prefix: &str) {
    use utoipa::openapi::{
        path::{Parameter, ParameterBuilder, ParameterIn},
        Required,
    };
    let account = || -> Parameter {
        ParameterBuilder::new()
            .name("account")
            .parameter_in(ParameterIn::Path)
            .required(Required::True)
            .description(Some("The account's id or the platform's external_id"))
            .schema(Some(
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String),
            ))
            .build()
    };
    for (path, item) in doc.paths.paths.iter_mut() {
        let for_account = path.starts_with(&format!("{prefix}/"));
        let ops = [
            &mut item.get,
            &mut item.post,
            &mut item.patch,
            &mut item.delete,
            &mut item.put,
        ];
        for op in ops.into_iter().flatten() {
            let tag = op.tags.as_ref().and_then(|t| t.first()).cloned();
            op.operation_id = op.operation_id.take().map(|id| match &tag {
                Some(tag) => format!("{tag}_{id}"),
                None => id,
            });
            if !for_account {
                continue;
            }
            let params = op.parameters.get_or_insert_with(Vec::new);
            if !params.iter().any(|p| p.name == "account") {
                params.insert(0, account());
                op.operation_id = op.operation_id.take().map(|id| format!("{id}_for_account"));
            }
        }
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
