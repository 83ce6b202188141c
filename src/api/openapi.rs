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

/// Every operation's mutable handle, whatever its method.
fn operations_mut(
    item: &mut utoipa::openapi::path::PathItem,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> + '_ {
    [
        &mut item.get,
        &mut item.post,
        &mut item.patch,
        &mut item.delete,
        &mut item.put,
    ]
    .into_iter()
    .flatten()
}

/// The answers every operation can give whatever it does, written once:
/// 401 (no key, or one that is unknown or revoked) and 403 (the wrong kind
/// of key: a platform or admin one is needed) on every operation, 404 where
/// the path names something, 400 where there is a body or a query to read,
/// and 415 where the body must be JSON.
pub fn document_failures(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{Content, Ref, ResponseBuilder};
    let error = || Content::new(Some(Ref::from_schema_name("ErrorOut")));
    let components = doc.components.get_or_insert_with(Default::default);
    for (name, description) in [
        (
            "Unauthorized",
            "No API key, or one that is unknown or revoked",
        ),
        (
            "Forbidden",
            "This key may not do this: it needs a platform key, an admin key, or another role",
        ),
        (
            "NotFound",
            "Nothing of that id here (another account's ids answer the same)",
        ),
        (
            "BadRequest",
            "The request could not be read: the error says which field and why",
        ),
        (
            "UnsupportedMediaType",
            "The body must be JSON (`content-type: application/json`)",
        ),
    ] {
        components.responses.insert(
            name.to_string(),
            ResponseBuilder::new()
                .description(description)
                .content("application/json", error())
                .build()
                .into(),
        );
    }
    for (path, item) in doc.paths.paths.iter_mut() {
        let names_something = path.contains('{');
        for op in operations_mut(item) {
            let has_query = op.parameters.as_ref().is_some_and(|ps| {
                ps.iter()
                    .any(|p| p.parameter_in == utoipa::openapi::path::ParameterIn::Query)
            });
            let has_body = op.request_body.is_some();
            let mut add = |status: &str, name: &str| {
                op.responses
                    .responses
                    .entry(status.to_string())
                    .or_insert_with(|| Ref::from_response_name(name).into());
            };
            add("401", "Unauthorized");
            add("403", "Forbidden");
            if names_something {
                add("404", "NotFound");
            }
            if has_body || has_query {
                add("400", "BadRequest");
            }
            if has_body {
                add("415", "UnsupportedMediaType");
            }
        }
    }
}

/// Links from each operation that creates something to the operations on
/// what it created, so a client (and a stateful fuzzer) can follow them:
/// `POST …/endpoints` → every `…/endpoints/{id}…` with the new id, the
/// account's own `{account}` carried along; `POST …/events` → the event
/// and its first delivery's resend.
pub fn link_operations(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{link::Link, RefOr};
    let targets: Vec<(String, String)> = doc
        .paths
        .paths
        .iter()
        .flat_map(|(path, item)| {
            [&item.get, &item.post, &item.patch, &item.delete, &item.put]
                .into_iter()
                .flatten()
                .filter_map(|op| op.operation_id.clone())
                .map(move |id| (path.clone(), id))
        })
        .collect();
    let params_of = |path: &str| -> Vec<String> {
        path.split('{')
            .skip(1)
            .filter_map(|rest| rest.split_once('}').map(|(name, _)| name.to_string()))
            .collect()
    };
    for (path, item) in doc.paths.paths.iter_mut() {
        let Some(post) = item.post.as_mut() else {
            continue;
        };
        let Some((_, RefOr::T(created))) = post
            .responses
            .responses
            .iter_mut()
            .find(|(status, _)| status.starts_with('2'))
        else {
            continue;
        };
        let own = params_of(path);
        for (target, op_id) in &targets {
            // What this operation made: its collection's path and one more
            // parameter; or, from an event, its deliveries.
            let (new_param, from) = match target.strip_prefix(&format!("{path}/{{")) {
                Some(rest) => match rest.split_once('}') {
                    Some((name, _)) => (name.to_string(), "$response.body#/id".to_string()),
                    None => continue,
                },
                None => {
                    let deliveries = path
                        .strip_suffix("/events")
                        .map(|base| format!("{base}/deliveries/{{id}}/resend"));
                    if deliveries.as_deref() != Some(target.as_str()) {
                        continue;
                    }
                    (
                        "id".to_string(),
                        "$response.body#/deliveries/0/id".to_string(),
                    )
                }
            };
            let mut link = Link::builder().operation_id(op_id.clone());
            for p in params_of(target) {
                if p == new_param {
                    link = link.parameter(p, from.clone());
                } else if own.contains(&p) {
                    link = link.parameter(p.clone(), format!("$request.path.{p}"));
                }
            }
            created.links.insert(op_id.clone(), link.build().into());
        }
    }
}

/// Renames every link's `operation_id` / `operation_ref` to the spec's
/// `operationId` / `operationRef`.
pub fn spell_links(doc: &mut serde_json::Value) {
    let Some(paths) = doc.get_mut("paths").and_then(|p| p.as_object_mut()) else {
        return;
    };
    let links = paths
        .values_mut()
        .filter_map(|item| item.as_object_mut())
        .flat_map(|item| item.values_mut())
        .filter_map(|op| op.get_mut("responses").and_then(|r| r.as_object_mut()))
        .flat_map(|responses| responses.values_mut())
        .filter_map(|response| response.get_mut("links").and_then(|l| l.as_object_mut()))
        .flat_map(|links| links.values_mut())
        .filter_map(|link| link.as_object_mut());
    for link in links {
        for (from, to) in [
            ("operation_id", "operationId"),
            ("operation_ref", "operationRef"),
        ] {
            if let Some(v) = link.remove(from) {
                if v.as_str().is_some_and(|s| !s.is_empty()) {
                    link.insert(to.to_string(), v);
                }
            }
        }
    }
}
