//! The body of `POST /api/v1/events`, checked as a pure function of the
//! headers and bytes, before anything touches the database.

use axum::http::{header, HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::error::ApiError;
use crate::ids;

pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;
const MAX_ID_CHARS: usize = 255;

/// An event from a producer. `payload` is any JSON value, stored byte for byte.
#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = EventIn)]
pub(super) struct EventIn<'a> {
    /// Your id for the event; repeated ids are idempotent. Generated if
    /// absent. It travels as the `webhook-id` header: printable ASCII, not
    /// starting or ending with a space.
    #[schema(
        max_length = 255,
        pattern = r"^[!-~]([ -~]*[!-~])?$",
        example = "evt_1"
    )]
    id: Option<String>,
    /// No control characters, and something besides spaces (kept trimmed).
    #[serde(rename = "type")]
    #[schema(rename = "type", required = true, value_type = String, max_length = 255,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\u0000-\u001f\u007f-\u009f]*$", example = "invoice.paid")]
    event_type: Option<String>,
    /// Any JSON value, `null` too; only a missing one is refused. Stored
    /// and sent byte for byte; at most 256 KiB.
    #[serde(borrow, default, deserialize_with = "present")]
    #[schema(required = true, value_type = serde_json::Value, example = json!({"amount": 42}))]
    payload: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

fn bad(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::bad_request(code, message)
}

/// An event as the producer sent it, checked.
pub struct Incoming {
    pub id: String,
    pub event_type: String,
    /// The payload's JSON exactly as sent (without surrounding whitespace).
    pub payload: Vec<u8>,
}

/// Everything ingest checks before touching the database, as a pure
/// function of the headers and body, so it can be fuzzed.
pub fn read_event(headers: &HeaderMap, body: &[u8]) -> Result<Incoming, ApiError> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the event as content-type: application/json",
        ));
    }
    let input: EventIn = serde_json::from_slice(body)
        .map_err(|e| bad("invalid_json", format!("body is not valid JSON: {e}")))?;
    let raw_type = input
        .event_type
        .ok_or_else(|| bad("missing_type", "\"type\" is required"))?;
    let event_type = raw_type.trim().to_string();
    if event_type.is_empty() {
        return Err(bad("missing_type", "\"type\" must not be blank"));
    }
    if raw_type.chars().count() > 255 || event_type.chars().any(char::is_control) {
        return Err(bad(
            "invalid_type",
            "\"type\" must be at most 255 characters, none of them control characters",
        ));
    }
    let payload = input
        .payload
        .ok_or_else(|| bad("missing_payload", "\"payload\" is required"))?;
    if payload.get().len() > MAX_PAYLOAD_BYTES {
        return Err(too_large());
    }
    let header_key = headers.get("idempotency-key").map(|v| {
        v.to_str()
            .map(str::to_string)
            .map_err(|_| bad("invalid_id", "Idempotency-Key must be printable text"))
    });
    let header_key = header_key.transpose()?;
    // A key sent must be a valid id even where the body's id wins.
    if let Some(key) = &header_key {
        check_id(key)?;
    }
    // The body's id is the event's; the header stands in for a missing one.
    let id = match (input.id, header_key) {
        (Some(id), _) | (None, Some(id)) => id,
        (None, None) => ids::new_id(ids::EVENT),
    };
    check_id(&id)?;
    Ok(Incoming {
        id,
        event_type,
        payload: payload.get().as_bytes().to_vec(),
    })
}

/// An event id travels as the webhook-id header, which carries printable
/// ASCII; receivers may trim a value's outer spaces, breaking the signature.
fn check_id(id: &str) -> Result<(), ApiError> {
    let printable = id.bytes().all(|b| (b' '..=b'~').contains(&b));
    if id.is_empty() || id.len() > MAX_ID_CHARS || !printable || id.trim() != id {
        return Err(bad(
            "invalid_id",
            format!(
                "event id must be 1 to {MAX_ID_CHARS} printable ASCII characters, not starting or ending with a space"
            ),
        ));
    }
    Ok(())
}

pub(super) fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("payload is larger than {} KiB", MAX_PAYLOAD_BYTES / 1024),
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn json_headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
        h
    }

    /// Any JSON value, including odd strings: escapes, controls, astral
    /// characters, right-to-left marks.
    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            "\\PC*|[\u{0}-\u{1f}\u{200e}\u{200f}\u{202e}]*".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map("\\PC{0,8}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn fuzz_ingest_body_any_bytes_never_panic_and_fail_as_client_errors(body in prop::collection::vec(any::<u8>(), 0..256)) {
            match read_event(&json_headers(), &body) {
                Ok(event) => {
                    prop_assert!(serde_json::from_slice::<serde::de::IgnoredAny>(&event.payload).is_ok());
                    prop_assert!(body.windows(event.payload.len().max(1)).any(|w| w == &event.payload[..]));
                }
                Err(e) => prop_assert!(e.status.is_client_error(), "{}", e.status),
            }
        }

        #[test]
        fn fuzz_ingest_body_any_json_payload_is_kept_byte_for_byte(payload in json_value(), event_type in "\\PC{1,20}") {
            let raw = serde_json::to_vec(&payload).unwrap();
            let mut body = serde_json::to_vec(&serde_json::json!({ "id": "evt_1", "type": event_type })).unwrap();
            body.pop();
            body.extend_from_slice(b",\"payload\":");
            body.extend_from_slice(&raw);
            body.push(b'}');
            match read_event(&json_headers(), &body) {
                Ok(event) => prop_assert_eq!(event.payload, raw),
                // Only the type may be refused: blank, or with control characters.
                Err(e) => prop_assert!(
                    matches!(e.code, "invalid_type" | "missing_type"),
                    "{}: {}", e.code, e.message
                ),
            }
        }
    }
}
