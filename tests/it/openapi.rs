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

    let expected = [
        ("post", "/api/v1/events"),
        ("get", "/api/v1/events"),
        ("get", "/api/v1/events/{id}"),
        ("post", "/api/v1/deliveries/{id}/resend"),
        ("post", "/api/v1/endpoints"),
        ("get", "/api/v1/endpoints"),
        ("get", "/api/v1/endpoints/{id}"),
        ("patch", "/api/v1/endpoints/{id}"),
        ("delete", "/api/v1/endpoints/{id}"),
        ("post", "/api/v1/endpoints/{id}/pause"),
        ("post", "/api/v1/endpoints/{id}/resume"),
        ("post", "/api/v1/endpoints/{id}/rotate-secret"),
        ("get", "/api/v1/endpoints/{id}/health"),
        ("post", "/api/v1/admin/replays"),
        ("get", "/api/v1/admin/replays"),
        ("get", "/api/v1/admin/replays/{id}"),
        ("post", "/api/v1/admin/replays/{id}/cancel"),
    ];
    for (method, path) in expected {
        let op = &doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path} documented");
        assert!(
            !op["summary"].as_str().unwrap_or_default().is_empty(),
            "{method} {path} has a summary"
        );
    }
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
