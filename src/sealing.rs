//! Endpoint signing secrets are sealed (encrypted and authenticated) before
//! they reach the database, with XChaCha20-Poly1305 and a key from
//! configuration: a stolen database file or dump holds no usable secret.
//! The endpoint's id is the associated data, so a sealed secret copied onto
//! another endpoint does not open.

mod key_file;

use base64::{engine::general_purpose::STANDARD, Engine};
use chacha20poly1305::{
    aead::{Aead, AeadCore, KeyInit, OsRng, Payload},
    XChaCha20Poly1305, XNonce,
};
pub use key_file::load_or_create;

/// Marks a sealed value; anything else in the column is a plaintext secret
/// from before sealing, which start-up seals.
pub const PREFIX: &str = "sealed1:";
const NONCE_LEN: usize = 24;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("the secrets key must be 32 bytes in base64 (44 characters); generate one with `openssl rand -base64 32`")]
    BadKey,
    #[error("a stored endpoint secret does not open with this secrets key (a different key sealed it, or it was altered)")]
    WrongKey,
}

/// The key; its `Debug` shows nothing of it.
#[derive(Clone)]
pub struct SecretsKey {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretsKey(…)")
    }
}

impl SecretsKey {
    pub fn from_base64(text: &str) -> Result<SecretsKey, SealError> {
        let bytes = STANDARD
            .decode(text.trim())
            .map_err(|_| SealError::BadKey)?;
        let cipher = XChaCha20Poly1305::new_from_slice(&bytes).map_err(|_| SealError::BadKey)?;
        Ok(SecretsKey { cipher })
    }

    /// A fresh random key, and its base64 form to keep.
    pub fn generate() -> (SecretsKey, String) {
        let key = XChaCha20Poly1305::generate_key(&mut OsRng);
        let text = STANDARD.encode(key);
        (
            SecretsKey {
                cipher: XChaCha20Poly1305::new(&key),
            },
            text,
        )
    }

    pub fn seal(&self, endpoint_id: &str, secret: &str) -> String {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let payload = Payload {
            msg: secret.as_bytes(),
            aad: endpoint_id.as_bytes(),
        };
        // Encryption into a Vec only fails for messages of gigabytes.
        let sealed = self
            .cipher
            .encrypt(&nonce, payload)
            .expect("a signing secret is far below the AEAD size limit");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        format!("{PREFIX}{}", STANDARD.encode(out))
    }

    /// Opens a sealed value; a value without the prefix is returned as is
    /// (a plaintext secret not sealed yet).
    pub fn open(&self, endpoint_id: &str, stored: &str) -> Result<String, SealError> {
        let Some(body) = stored.strip_prefix(PREFIX) else {
            return Ok(stored.to_string());
        };
        let bytes = STANDARD.decode(body).map_err(|_| SealError::WrongKey)?;
        if bytes.len() < NONCE_LEN {
            return Err(SealError::WrongKey);
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let payload = Payload {
            msg: sealed,
            aad: endpoint_id.as_bytes(),
        };
        let plain = self
            .cipher
            .decrypt(XNonce::from_slice(nonce), payload)
            .map_err(|_| SealError::WrongKey)?;
        String::from_utf8(plain).map_err(|_| SealError::WrongKey)
    }
}

pub fn is_sealed(stored: &str) -> bool {
    stored.starts_with(PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_secrets_open_only_with_their_key_and_endpoint() {
        let (key, text) = SecretsKey::generate();
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let sealed = key.seal("ep_1", secret);
        assert!(is_sealed(&sealed));
        assert!(!sealed.contains(secret) && !sealed.contains("MfKQ9r8GKYqr"));
        assert_ne!(sealed, key.seal("ep_1", secret), "a fresh nonce each time");
        assert_eq!(key.open("ep_1", &sealed).unwrap(), secret);
        assert_eq!(
            SecretsKey::from_base64(&text)
                .unwrap()
                .open("ep_1", &sealed)
                .unwrap(),
            secret
        );
        assert_eq!(key.open("ep_2", &sealed), Err(SealError::WrongKey));
        let (other, _) = SecretsKey::generate();
        assert_eq!(other.open("ep_1", &sealed), Err(SealError::WrongKey));
        let mut altered = sealed.clone();
        altered.pop();
        altered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert_eq!(key.open("ep_1", &altered), Err(SealError::WrongKey));
        assert_eq!(key.open("ep_1", "whsec_plain").unwrap(), "whsec_plain");
    }

    #[test]
    fn keys_must_be_32_bytes_of_base64() {
        assert_eq!(
            SecretsKey::from_base64("short").unwrap_err(),
            SealError::BadKey
        );
        assert_eq!(
            SecretsKey::from_base64(&STANDARD.encode([7u8; 16])).unwrap_err(),
            SealError::BadKey
        );
        assert!(SecretsKey::from_base64(&STANDARD.encode([7u8; 32])).is_ok());
        assert!(!format!("{:?}", SecretsKey::generate().0).contains('='));
    }
}
