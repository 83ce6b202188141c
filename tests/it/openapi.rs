//! The OpenAPI document covers every REST route, and the schemas it
//! declares match what the API really answers.

use std::collections::BTreeSet;

use dakghar::store::Store;
use reqwest::Method;
use serde_json::{json, Value};

use crate::{api_client::Api, receiver::Receiver};

on_both_backends!(the_openapi_document_covers_every_route_and_matches_the_answers);

fn props(doc: &Value, schema: &str) -> BTreeSet<String> {
    doc["components"]["schemas"][schema]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("schema {schema} in the document"))
        .keys()
        .cloned()
        .collect()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

async fn the_openapi_document_covers_every_route_and_matches_the_answers(store: Store) {
    let api = Api::new(store).await;
    let doc: Value = reqwest::get(api.app.url("/api/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));

    // An account's routes, at /api/v1 with its key and again under
    // /api/v1/accounts/{account} for a platform key.
    let account_routes = [
        ("post", "/events"),
        ("get", "/events"),
        ("get", "/events/{id}"),
        ("post", "/deliveries/{id}/resend"),
        ("post", "/endpoints"),
        ("get", "/endpoints"),
        ("get", "/endpoints/{id}"),
        ("patch", "/endpoints/{id}"),
        ("delete", "/endpoints/{id}"),
        ("post", "/endpoints/{id}/pause"),
        ("post", "/endpoints/{id}/resume"),
        ("get", "/endpoints/{id}/queue"),
        ("post", "/endpoints/{id}/queue/discard"),
        ("post", "/endpoints/{id}/rotate-secret"),
        ("get", "/endpoints/{id}/health"),
    ];
    let mut expected: Vec<(&str, String)> = Vec::new();
    for prefix in ["/api/v1", "/api/v1/accounts/{account}"] {
        for (method, path) in account_routes {
            expected.push((method, format!("{prefix}{path}")));
        }
    }
    for (method, path) in [
        ("post", "/api/v1/admin/replays"),
        ("get", "/api/v1/admin/replays"),
        ("get", "/api/v1/admin/replays/{id}"),
        ("post", "/api/v1/admin/replays/{id}/cancel"),
        ("post", "/api/v1/accounts"),
        ("get", "/api/v1/accounts"),
        ("get", "/api/v1/accounts/{account}"),
        ("patch", "/api/v1/accounts/{account}"),
        ("delete", "/api/v1/accounts/{account}"),
        ("post", "/api/v1/accounts/{account}/users"),
        ("post", "/api/v1/accounts/{account}/portal-sessions"),
    ] {
        expected.push((method, path.to_string()));
    }
    for (method, path) in &expected {
        let op = &doc["paths"][path.as_str()][*method];
        assert!(op.is_object(), "{method} {path} documented");
        assert!(
            !op["summary"].as_str().unwrap_or_default().is_empty(),
            "{method} {path} has a summary"
        );
        if path.contains("{account}") {
            let names: Vec<&str> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["name"].as_str())
                .collect();
            assert!(
                names.contains(&"account"),
                "{method} {path} names its account"
            );
        }
    }
    let ids: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|p| p.as_object().unwrap().values())
        .filter_map(|op| op["operationId"].as_str())
        .collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "every operation id is its own");
    let documented: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| p.as_object().unwrap().len())
        .sum();
    assert_eq!(
        documented,
        expected.len(),
        "nothing undocumented, nothing extra"
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["api_key"]["scheme"],
        "bearer"
    );

    // What the API answers has exactly the documented fields.
    let rx = Receiver::start().await;
    let ep = api.endpoint(&rx).await;
    assert_eq!(
        keys(&ep),
        props(&doc, "EndpointOut"),
        "endpoint with secret"
    );
    let ev = api
        .send(json!({ "id": "evt_doc", "type": "t", "payload": {} }))
        .await;
    assert_eq!(keys(&ev), props(&doc, "IngestOut"));
    api.tick().await;
    let detail = api.detail("evt_doc").await;
    assert_eq!(keys(&detail), props(&doc, "EventDetailOut"));
    assert_eq!(keys(&detail["deliveries"][0]), props(&doc, "DeliveryOut"));
    assert_eq!(
        keys(&detail["deliveries"][0]["attempts"][0]),
        props(&doc, "AttemptOut")
    );
    let (_, list) = api.call(Method::GET, "/api/v1/events", None).await;
    assert_eq!(keys(&list), props(&doc, "EventListOut"));
    assert_eq!(keys(&list["data"][0]), props(&doc, "EventSummaryOut"));
    let (_, health) = api
        .call(
            Method::GET,
            &format!("/api/v1/endpoints/{}/health", ep["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(keys(&health), props(&doc, "HealthOut"));
    let (_, err) = api.call(Method::GET, "/api/v1/events/nope", None).await;
    assert_eq!(keys(&err), props(&doc, "ErrorOut"));
    assert_eq!(keys(&err["error"]), props(&doc, "ErrorDetail"));
}
