//! Endpoint secrets pass through the secrets key on their way in and out:
//! sealed when written, opened when read, so callers only ever see the
//! plaintext and the database only ever holds the sealed form.

use std::sync::Arc;

use super::{Endpoint, Pool, Result, Store, StoreError};
use crate::sealing::{is_sealed, SecretsKey};

impl Store {
    pub fn with_secrets_key(mut self, key: SecretsKey) -> Store {
        self.secrets = Some(Arc::new(key));
        self
    }

    pub(super) fn secrets_key(&self) -> Result<&SecretsKey> {
        self.secrets.as_deref().ok_or_else(|| {
            StoreError::Config("no secrets key: endpoint secrets cannot be sealed or opened".into())
        })
    }

    /// The endpoint with its secrets opened, to sign with: the current
    /// secret must open; a previous one that does not is left out.
    pub(super) fn opened_to_sign(&self, mut ep: Endpoint) -> Result<Endpoint> {
        let key = self.secrets_key()?;
        ep.secret = key.open(&ep.id, &ep.secret)?;
        ep.previous_secret = ep
            .previous_secret
            .take()
            .and_then(|previous| key.open(&ep.id, &previous).ok());
        Ok(ep)
    }

    /// The endpoint to show: one whose secret does not open (sealed with
    /// another key, or altered) is still shown, with an empty secret and
    /// the reason as its fault, rather than failing every page and call
    /// that lists it. Nothing signs with an empty secret.
    pub(super) fn opened(&self, ep: Endpoint) -> Result<Endpoint> {
        let id = ep.id.clone();
        let fallback = (ep.fault.clone(), ep.fault_at);
        match self.opened_to_sign(ep.clone()) {
            Ok(ep) => Ok(ep),
            Err(StoreError::Sealing(e)) => {
                tracing::error!(endpoint = %id, error = %e, "an endpoint secret does not open");
                let mut ep = ep;
                ep.secret = String::new();
                ep.previous_secret = None;
                ep.fault = fallback.0.or_else(|| Some(e.to_string()));
                ep.fault_at = fallback.1;
                Ok(ep)
            }
            Err(e) => Err(e),
        }
    }

    pub(super) fn opened_all(&self, eps: Vec<Endpoint>) -> Result<Vec<Endpoint>> {
        eps.into_iter().map(|ep| self.opened(ep)).collect()
    }

    /// The endpoints whose stored secrets this key does not open (sealed
    /// with another key, or altered); reads only.
    pub async fn secrets_that_do_not_open(&self) -> Result<Vec<String>> {
        let key = self.secrets_key()?;
        let sql = "SELECT id, secret, previous_secret FROM endpoints";
        let rows: Vec<(String, String, Option<String>)> =
            on_pool!(self, |p| sqlx::query_as(sql).fetch_all(p).await)?;
        Ok(rows
            .into_iter()
            .filter(|(id, secret, _)| key.open(id, secret).is_err())
            .map(|(id, _, _)| id)
            .collect())
    }

    /// At start-up: refuses a key that does not open what is stored (a
    /// typo in the key must not look like every signature breaking), then
    /// seals any secret still stored in plaintext. Returns how many it sealed.
    pub async fn seal_stored_secrets(&self) -> Result<u64> {
        let key = self.secrets_key()?;
        let sql = "SELECT id, secret, previous_secret FROM endpoints";
        let rows: Vec<(String, String, Option<String>)> =
            on_pool!(self, |p| sqlx::query_as(sql).fetch_all(p).await)?;
        let mut sealed = 0;
        for (id, secret, previous) in rows {
            // Opening checks the key on what is sealed and passes plaintext through.
            key.open(&id, &secret)?;
            if let Some(p) = &previous {
                key.open(&id, p)?;
            }
            if is_sealed(&secret) && previous.as_deref().is_none_or(is_sealed) {
                continue;
            }
            let reseal = |v: &str| {
                if is_sealed(v) {
                    v.to_string()
                } else {
                    key.seal(&id, v)
                }
            };
            let new_secret = reseal(&secret);
            let new_previous = previous.as_deref().map(reseal);
            // Only if unchanged since read: a rotation in between wins.
            let update = "UPDATE endpoints SET secret = $1, previous_secret = $2 \
                          WHERE id = $3 AND secret = $4";
            on_writer!(self, |p| sqlx::query(update)
                .bind(&new_secret)
                .bind(&new_previous)
                .bind(&id)
                .bind(&secret)
                .execute(p)
                .await
                .map(|_| ()))?;
            sealed += 1;
        }
        Ok(sealed)
    }
}
