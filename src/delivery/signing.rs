//! Standard Webhooks signatures: `v1,` + base64(HMAC-SHA256(key,
//! "{id}.{timestamp}.{body}")), where the key is the base64 after `whsec_`.

use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use crate::{clock::Timestamp, store::Endpoint};

pub const SECRET_PREFIX: &str = "whsec_";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SigningError {
    #[error("signing secret must start with {SECRET_PREFIX} followed by base64")]
    Malformed,
}

/// A fresh secret: 24 random bytes, as customers paste them into receivers.
pub fn new_secret() -> String {
    let mut key = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut key);
    format!("{SECRET_PREFIX}{}", STANDARD.encode(key))
}

fn key(secret: &str) -> Result<Vec<u8>, SigningError> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    // Empty is what a secret that would not open is shown as: never a key.
    STANDARD
        .decode(encoded)
        .ok()
        .filter(|k| !k.is_empty())
        .ok_or(SigningError::Malformed)
}

pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Result<String, SigningError> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(&key(secret)?).map_err(|_| SigningError::Malformed)?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// The secrets a request to `endpoint` is signed with at `now`: the
/// current one, and during a rotation's overlap the previous one too.
pub fn secrets_of(endpoint: &Endpoint, now: Timestamp) -> Vec<&str> {
    let mut secrets = vec![endpoint.secret.as_str()];
    if let (Some(old), Some(until)) = (
        &endpoint.previous_secret,
        endpoint.previous_secret_expires_at,
    ) {
        if until > now.millis() {
            secrets.push(old.as_str());
        }
    }
    secrets
}

/// The `webhook-signature` value: one signature per secret, space-separated,
/// so receivers holding either the old or the new secret accept it during rotation.
pub fn signature_header(
    secrets: &[&str],
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, SigningError> {
    let signatures = secrets
        .iter()
        .map(|s| sign(s, id, timestamp, body))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(signatures.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_secrets_are_well_formed_and_distinct() {
        let a = new_secret();
        assert!(a.starts_with("whsec_"));
        assert_eq!(key(&a).unwrap().len(), 24);
        assert_ne!(a, new_secret());
    }

    #[test]
    fn malformed_secrets_are_refused() {
        assert_eq!(
            sign("whsec_!!!", "id", 1, b""),
            Err(SigningError::Malformed)
        );
        assert_eq!(sign("", "id", 1, b""), Err(SigningError::Malformed));
        assert_eq!(sign("whsec_", "id", 1, b""), Err(SigningError::Malformed));
    }

    #[test]
    fn rotation_carries_both_signatures() {
        let (old, new) = (new_secret(), new_secret());
        let header = signature_header(&[&new, &old], "msg_1", 5, b"{}").unwrap();
        let parts: Vec<_> = header.split(' ').collect();
        assert_eq!(
            parts,
            vec![
                sign(&new, "msg_1", 5, b"{}").unwrap(),
                sign(&old, "msg_1", 5, b"{}").unwrap()
            ]
        );
    }
}
