//! The secret part of single-use links. A link's token is `<id>.<secret>`:
//! the id finds the row, only a hash of the secret is stored, and the
//! secret is compared in constant time. Every way a token can be wrong
//! (unknown, altered, used, expired, another kind) is the same answer.

use crate::{
    auth::api_key,
    clock::Timestamp,
    error::{Error, Result},
    ids,
    store::{AccessLink, LinkKind, Store, StoreError},
};

/// What a link that cannot be used is, whatever the reason.
pub const UNUSABLE: &str = "link";

/// A fresh secret, and the hash to store of it.
pub fn new_secret() -> (String, String) {
    let secret = ids::random_token(32);
    let hash = api_key::hash(&secret);
    (secret, hash)
}

pub fn token(link: &AccessLink, secret: &str) -> String {
    format!("{}.{secret}", link.id)
}

/// The link `token` names, if its secret matches and it is of `kind`,
/// unused and unexpired at `now`.
pub async fn check(
    store: &Store,
    token: &str,
    kind: LinkKind,
    now: Timestamp,
) -> Result<AccessLink> {
    let unusable = || Error::NotFound(UNUSABLE);
    let (id, secret) = token.split_once('.').ok_or_else(unusable)?;
    let link = match store.link(id).await {
        Ok(link) => link,
        Err(StoreError::NotFound) => return Err(unusable()),
        Err(e) => return Err(e.into()),
    };
    let usable = api_key::matches(secret, &link.secret_hash)
        && link.kind == kind
        && link.used_at.is_none()
        && link.expires_at > now.millis();
    if usable {
        Ok(link)
    } else {
        Err(unusable())
    }
}
