//! The Standard Webhooks test vectors reproduce exactly.

use dakghar::delivery::signing::sign;

#[test]
fn standard_webhooks_vectors_reproduce() {
    let raw = include_str!("../fixtures/standard-webhooks.json");
    let doc: serde_json::Value = serde_json::from_str(raw).unwrap();
    let vectors = doc["vectors"].as_array().unwrap();
    assert!(vectors.len() >= 2);
    for v in vectors {
        let got = sign(
            v["secret"].as_str().unwrap(),
            v["id"].as_str().unwrap(),
            v["timestamp"].as_i64().unwrap(),
            v["payload"].as_str().unwrap().as_bytes(),
        )
        .unwrap();
        assert_eq!(got, v["signature"].as_str().unwrap(), "{}", v["name"]);
    }
}
