//! API keys: high-entropy random strings, stored only as a SHA-256 hash
//! (a slow hash buys nothing for 190 bits of randomness), shown once.

use sha2::{Digest, Sha256};

use crate::ids::random_token;

pub const KEY_PREFIX: &str = "dk_";
/// Platform keys act on any account; their prefix tells them apart.
pub const PLATFORM_KEY_PREFIX: &str = "dkp_";

pub struct NewKey {
    /// The full key: shown once, never stored.
    pub key: String,
    /// Enough of the key to recognise it in a list.
    pub prefix: String,
    pub hash: String,
}

pub fn generate() -> NewKey {
    generate_with(KEY_PREFIX)
}

pub fn generate_platform() -> NewKey {
    generate_with(PLATFORM_KEY_PREFIX)
}

fn generate_with(prefix: &str) -> NewKey {
    let key = format!("{prefix}{}", random_token(32));
    NewKey {
        prefix: key.chars().take(prefix.len() + 6).collect(),
        hash: hash(&key),
        key,
    }
}

pub fn hash(key: &str) -> String {
    format!("{:x}", Sha256::digest(key.as_bytes()))
}

/// Whether `secret` hashes to `stored`, taking the same time wherever
/// they differ.
pub fn matches(secret: &str, stored: &str) -> bool {
    use subtle::ConstantTimeEq;
    hash(secret).as_bytes().ct_eq(stored.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_random_and_hash_stably() {
        let a = super::generate();
        let b = super::generate();
        assert_ne!(a.key, b.key);
        assert!(a.key.starts_with("dk_") && a.key.len() == 35);
        assert_eq!(a.hash, super::hash(&a.key));
        assert_eq!(a.prefix.len(), 9);
        assert!(!a.hash.contains(&a.key));
    }
}
