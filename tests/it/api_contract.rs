//! What `make fuzz` (schemathesis against the OpenAPI document) found, each
//! kept as a regular test: the document names every answer an operation
//! gives and links what one creates to what acts on it, and the API
//! refuses exactly what the document calls invalid.

use dakghar::store::Store;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::{api_client::Api, receiver::Receiver};

on_both_backends!(
    every_operation_documents_its_failures_and_creations_link_onwards,
    bodies_and_queries_are_read_as_the_document_says,
);

async fn document(api: &Api) -> Value {
    reqwest::get(api.app.url("/api/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn every_operation_documents_its_failures_and_creations_link_onwards(store: Store) {
    let api = Api::new(store).await;
    let doc = document(&api).await;
    let paths = doc["paths"].as_object().unwrap();
    let mut operations = 0;
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            operations += 1;
            let responses = op["responses"].as_object().unwrap();
            let has = |s: &str| responses.contains_key(s);
            // 401 and 403 were missing from most operations.
            assert!(
                has("401") && has("403"),
                "{method} {path}: {:?}",
                responses.keys()
            );
            if path.contains('{') {
                assert!(has("404"), "{method} {path}");
            }
            if op.get("requestBody").is_some() {
                assert!(has("400") && has("415"), "{method} {path}");
            }
        }
    }
    assert!(operations >= 40, "{operations}");
    for name in ["Unauthorized", "Forbidden", "NotFound", "BadRequest"] {
        assert!(doc["components"]["responses"][name].is_object(), "{name}");
    }

    // A fuzzer (or a client) follows links from what is created.
    let created = &paths["/api/v1/endpoints"]["post"]["responses"]["201"]["links"];
    let get = &created["endpoints_get_one"];
    assert_eq!(get["operationId"], "endpoints_get_one", "{created}");
    assert_eq!(get["parameters"]["id"], "$response.body#/id");
    assert!(
        get.get("operation_id").is_none(),
        "spelled as the spec says"
    );
    let for_account = &paths["/api/v1/accounts/{account}/endpoints"]["post"]["responses"]["201"]
        ["links"]["endpoints_get_one_for_account"]["parameters"];
    assert_eq!(for_account["account"], "$request.path.account");
    let sent = &paths["/api/v1/events"]["post"]["responses"]["202"]["links"];
    assert_eq!(
        sent["events_resend"]["parameters"]["id"], "$response.body#/deliveries/0/id",
        "{sent}"
    );

    // The real rules are in the schemas.
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["EndpointIn"]["properties"]["max_in_flight"]["maximum"],
        1000
    );
    assert_eq!(
        schemas["EndpointIn"]["properties"]["url"]["maxLength"],
        2048
    );
    let event = &schemas["EventIn"];
    assert!(event["required"]
        .as_array()
        .unwrap()
        .contains(&json!("type")));
    assert!(event["properties"]["id"]["pattern"].is_string());
    assert!(
        event["properties"]["payload"].get("type").is_none(),
        "a payload may be any JSON value: {}",
        event["properties"]["payload"]
    );
}

async fn bodies_and_queries_are_read_as_the_document_says(store: Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    let raw = |method: Method, path: &str, body: &str| {
        let req = api
            .http
            .request(method, api.app.url(path))
            .bearer_auth(&api.key)
            .header("content-type", "application/json")
            .body(body.to_string());
        async move {
            let res = req.send().await.unwrap();
            let status = res.status();
            (status, res.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    // serde reads a struct from an array too: a patch of [null, null] was
    // a 200 that changed nothing.
    let (s, ep) = raw(
        Method::POST,
        "/api/v1/endpoints",
        &json!({ "url": rx.url }).to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let id = ep["id"].as_str().unwrap();
    let (s, body) = raw(
        Method::PATCH,
        &format!("/api/v1/endpoints/{id}"),
        "[null, null]",
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("JSON object"));
    let (s, _) = raw(
        Method::POST,
        &format!("/api/v1/endpoints/{id}/queue/discard"),
        "[1]",
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // JSON Schema's integers include 5.0.
    let (s, body) = raw(
        Method::PATCH,
        &format!("/api/v1/endpoints/{id}"),
        r#"{"max_in_flight": 5.0}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["max_in_flight"], 5);
    let (s, _) = raw(
        Method::PATCH,
        &format!("/api/v1/endpoints/{id}"),
        r#"{"max_in_flight": 5.5}"#,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // Words are taken as sent: no spaces trimmed off a strategy.
    let (s, _) = raw(
        Method::PATCH,
        &format!("/api/v1/endpoints/{id}"),
        r#"{"retry_strategy": " linear"}"#,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // Lengths count what was sent, as the schema's maxLength does.
    let padded = format!("  {}/{}  ", rx.url, "a".repeat(2040 - rx.url.len()));
    assert_eq!(padded.chars().count(), 2045);
    let (s, _) = raw(
        Method::PATCH,
        &format!("/api/v1/endpoints/{id}"),
        &json!({ "url": format!("{padded}    ") }).to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "2049 characters as sent");

    // An Idempotency-Key must be a valid id even when the body has one,
    // and the body's id is the event's.
    let send = |key: Option<&str>, body: Value| {
        let mut req = api
            .http
            .post(api.app.url("/api/v1/events"))
            .bearer_auth(&api.key)
            .json(&body);
        if let Some(k) = key {
            req = req.header("idempotency-key", k);
        }
        async move {
            let res = req.send().await.unwrap();
            let status = res.status();
            (status, res.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let long = "k".repeat(256);
    let (s, _) = send(
        Some(&long),
        json!({ "id": "evt_a", "type": "t", "payload": null }),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, out) = send(
        Some("evt_other"),
        json!({ "id": "evt_a", "type": "t", "payload": null }),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(out["id"], "evt_a");
    let (s, out) = send(Some("evt_from_key"), json!({ "type": "t", "payload": 1 })).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(out["id"], "evt_from_key");
    // A payload may be null, and the event's page says so in its schema.
    let (s, detail) = api.call(Method::GET, "/api/v1/events/evt_a", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(detail["payload"].is_null());

    // Queries: an empty number or time is a mistake; a filter is exact.
    for (query, ok) in [
        ("limit=", false),
        ("limit=0", false),
        ("limit=100", true),
        ("since=", false),
        ("since=2026-12-01T00:00:00Z", true),
        ("status=%20404", false),
        ("status=0404", false),
        ("status=4XX", true),
        ("state=", true),
        ("cursor=00001.evt_a", true),
        ("cursor=x", false),
    ] {
        let (s, body) = api
            .call(Method::GET, &format!("/api/v1/events?{query}"), None)
            .await;
        let want = if ok {
            StatusCode::OK
        } else {
            StatusCode::BAD_REQUEST
        };
        assert_eq!(s, want, "{query}: {body}");
    }
}
