//! Typed, prefixed identifiers (`acc_…`, `ep_…`, `evt_…`), random and URL-safe.

use rand::{distributions::Alphanumeric, Rng};

pub const ACCOUNT: &str = "acc";
pub const USER: &str = "usr";
pub const API_KEY: &str = "key";
pub const ENDPOINT: &str = "ep";
pub const EVENT: &str = "evt";
pub const DELIVERY: &str = "dlv";
pub const NOTIFICATION: &str = "ntf";
pub const REPLAY: &str = "rpl";
pub const PLATFORM_KEY: &str = "pk";
pub const LINK: &str = "lnk";

pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", random_token(22))
}

pub fn random_token(len: usize) -> String {
    rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(len)
        .map(char::from)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_carry_their_prefix_and_differ() {
        let a = super::new_id(super::EVENT);
        let b = super::new_id(super::EVENT);
        assert!(a.starts_with("evt_") && a.len() == 26);
        assert_ne!(a, b);
    }
}
