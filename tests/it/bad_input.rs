//! Hostile and odd input at the API, on both backends: every payload is
//! either delivered byte for byte or refused with a 400, never a 500; odd
//! ids and types are refused; endpoint URLs are refused with a reason.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::{api_client::Api, receiver::Receiver};

on_both_backends!(
    odd_payloads_are_delivered_byte_exact_or_refused_never_a_500,
    odd_ids_and_types_are_refused_with_a_reason,
    bad_endpoint_urls_are_refused_with_a_reason,
    a_body_that_breaks_off_is_a_400_and_only_size_is_a_413,
);

async fn post_raw(api: &Api, body: Vec<u8>) -> (StatusCode, Value) {
    let res = api
        .http
        .post(api.app.url("/api/v1/events"))
        .bearer_auth(&api.key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn odd_payloads_are_delivered_byte_exact_or_refused_never_a_500(
    store: dakghar::store::Store,
) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    let payloads: Vec<&[u8]> = vec![
        br#"{"note":"nul \u0000 inside"}"#,
        br#"["\u0000","\u0000\u0000"]"#,
        br#"{"lone":"\ud800"}"#,
        br#"{"lone":"\udfff tail"}"#,
        r#"{"emoji":"🦀 👩🏽‍💻 🇧🇩"}"#.as_bytes(),
        "{\"rtl\":\"\u{202e}gnp.exe\u{202c} \u{200f}עברית\u{200e} বাংলা\"}".as_bytes(),
        br#"{"escaped":"\u202e\ud83e\udd80"}"#,
        br#"  {"spacing" :  [ 1 , 2.50e3 , -0 ]}  "#,
        br#""just a string""#,
        b"null",
    ];
    let mut delivered = Vec::new();
    for (n, payload) in payloads.iter().enumerate() {
        let mut body = format!(r#"{{"id":"evt_odd_{n}","type":"odd","payload":"#).into_bytes();
        body.extend_from_slice(payload);
        body.push(b'}');
        let (status, out) = post_raw(&api, body).await;
        let shown = String::from_utf8_lossy(payload);
        match status {
            StatusCode::ACCEPTED => delivered.push((format!("evt_odd_{n}"), *payload)),
            StatusCode::BAD_REQUEST => {
                assert!(out["error"]["message"].as_str().is_some(), "{shown}: {out}")
            }
            other => panic!("{shown}: {other} {out}"),
        }
    }
    assert!(
        delivered.len() >= 8,
        "only the lone surrogates may be refused"
    );
    while api.tick().await > 0 {}
    let got = rx.got();
    for (id, payload) in delivered {
        let arrived = got
            .iter()
            .find(|g| g.headers["webhook-id"] == id.as_str())
            .unwrap_or_else(|| panic!("{id} was not delivered"));
        // The stored payload is the JSON value as sent, without the
        // whitespace around it.
        let expected = String::from_utf8_lossy(payload).trim().to_string();
        assert_eq!(
            String::from_utf8_lossy(&arrived.body),
            expected,
            "{id} byte for byte"
        );
        assert_eq!(arrived.verified, Some(true), "{id} signed over those bytes");
        // And the event reads back through the API without an error.
        api.detail(&id).await;
    }

    // Bytes that are not JSON at all are a 400.
    for body in [
        b"{\"type\":\"odd\",\"payload\":\"raw \x00 byte\"}".to_vec(),
        b"{\"type\":\"odd\",\"payload\":\"\xff\xfe not utf-8\"}".to_vec(),
        b"{\"type\":\"odd\",\"payload\":".to_vec(),
        Vec::new(),
    ] {
        let (status, out) = post_raw(&api, body.clone()).await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{}: {out}",
            String::from_utf8_lossy(&body)
        );
    }
}

async fn odd_ids_and_types_are_refused_with_a_reason(store: dakghar::store::Store) {
    let api = Api::new(store).await;
    let rx = Receiver::start().await;
    api.endpoint(&rx).await;
    for (body, code) in [
        (
            json!({ "id": "evt\u{0}x", "type": "t", "payload": {} }),
            "invalid_id",
        ),
        (
            json!({ "id": "evt_🦀", "type": "t", "payload": {} }),
            "invalid_id",
        ),
        (
            json!({ "id": " evt_padded ", "type": "t", "payload": {} }),
            "invalid_id",
        ),
        (json!({ "type": "t\u{0}x", "payload": {} }), "invalid_type"),
        (
            json!({ "type": "t\u{1b}[31m", "payload": {} }),
            "invalid_type",
        ),
    ] {
        let (status, out) = api
            .call(Method::POST, "/api/v1/events", Some(body.clone()))
            .await;
        assert_eq!(
            (status, out["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "{body}"
        );
    }
    // Unicode types are fine: they are only ever compared and shown.
    let ev = api
        .send(json!({ "id": "evt_unicode_type", "type": "পেমেন্ট.সফল ✓", "payload": {} }))
        .await;
    assert_eq!(ev["deliveries"].as_array().unwrap().len(), 1);
    api.tick().await;
    assert_eq!(rx.count(), 1);
}

async fn bad_endpoint_urls_are_refused_with_a_reason(store: dakghar::store::Store) {
    let api = Api::new(store).await;
    let long = format!("https://example.com/{}", "a".repeat(10_000));
    for (url, reason) in [
        ("ftp://example.com/hook", "scheme"),
        ("javascript:alert(1)", "scheme"),
        (
            "https://user:pass@example.com/hook",
            "user name or password",
        ),
        ("file:///etc/passwd", "scheme"),
        ("http://", "not a valid URL"),
        (long.as_str(), "longer than"),
        ("https://pаypal.com/hook", "could pass for another name"),
        (
            "https://xn--80ak6aa92e.com/hook",
            "could pass for another name",
        ),
        ("https://ехаmple.com/hook", "could pass for another name"),
    ] {
        let (status, out) = api
            .call(
                Method::POST,
                "/api/v1/endpoints",
                Some(json!({ "url": url })),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {out}");
        let message = out["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(reason), "{url}: {message}");
    }
    let (status, out) = api
        .call(
            Method::POST,
            "/api/v1/endpoints",
            Some(json!({ "url": "https://müller.example/hook" })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "a real IDN host: {out}");
}

/// A body that stops short of its Content-Length (the client went away
/// half-way) was answered 413, as if it had been too large.
async fn a_body_that_breaks_off_is_a_400_and_only_size_is_a_413(store: dakghar::store::Store) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let api = Api::new(store).await;
    let addr = api.app.base.trim_start_matches("http://").to_string();
    let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /api/v1/events HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: 1000\r\nconnection: close\r\n\r\n",
        api.key
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(br#"{"type":"t","#).await.unwrap();
    conn.shutdown().await.unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("unreadable_body"), "{answer}");

    let huge = format!(r#"{{"type":"t","payload":"{}"}}"#, "x".repeat(300 * 1024));
    let (status, body) = post_raw(&api, huge.into_bytes()).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
}
