//! API keys: an account's keys, and the platform's keys that act on any
//! account. Only a hash of each key is stored.

use super::{conflict_as, expect_one, ApiKey, PlatformKey, Pool, Result, Store};
use crate::{clock::Timestamp, ids};

/// Whose a bearer token is.
#[derive(Debug, Clone)]
pub enum KeyHolder {
    /// An account's key: acts on that account only.
    Account(ApiKey),
    /// The platform's key: acts on any account.
    Platform(PlatformKey),
}

impl KeyHolder {
    pub fn key_id(&self) -> &str {
        match self {
            KeyHolder::Account(k) => &k.id,
            KeyHolder::Platform(k) => &k.id,
        }
    }

    pub fn is_platform(&self) -> bool {
        matches!(self, KeyHolder::Platform(_))
    }
}

impl Store {
    pub async fn create_api_key(
        &self,
        account_id: &str,
        name: &str,
        prefix: &str,
        key_hash: &str,
        is_admin: bool,
        now: Timestamp,
    ) -> Result<ApiKey> {
        let sql = "INSERT INTO api_keys \
                     (id, account_id, prefix, key_hash, is_admin, created_at, name) \
                   VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *";
        let id = ids::new_id(ids::API_KEY);
        on_pool!(self, |p| sqlx::query_as::<_, ApiKey>(sql)
            .bind(&id)
            .bind(account_id)
            .bind(prefix)
            .bind(key_hash)
            .bind(is_admin)
            .bind(now.millis())
            .bind(name)
            .fetch_one(p)
            .await)
        .map_err(|e| conflict_as(e, "an API key with this hash"))
    }

    /// A key that exists and is not revoked.
    pub async fn active_api_key(&self, key_hash: &str) -> Result<ApiKey> {
        let sql = "SELECT * FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, ApiKey>(sql)
            .bind(key_hash)
            .fetch_one(p)
            .await)?)
    }

    pub async fn list_api_keys(&self, account_id: &str) -> Result<Vec<ApiKey>> {
        let sql = "SELECT * FROM api_keys WHERE account_id = $1 ORDER BY created_at DESC, id";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, ApiKey>(sql)
            .bind(account_id)
            .fetch_all(p)
            .await)?)
    }

    pub async fn revoke_api_key(&self, account_id: &str, id: &str, now: Timestamp) -> Result<()> {
        let sql = "UPDATE api_keys SET revoked_at = $1 \
                   WHERE account_id = $2 AND id = $3 AND revoked_at IS NULL";
        let done = on_pool!(self, |p| sqlx::query(sql)
            .bind(now.millis())
            .bind(account_id)
            .bind(id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        expect_one(done)
    }

    pub async fn create_platform_key(
        &self,
        name: &str,
        prefix: &str,
        key_hash: &str,
        now: Timestamp,
    ) -> Result<PlatformKey> {
        let sql = "INSERT INTO platform_keys (id, prefix, key_hash, created_at, name) \
                   VALUES ($1, $2, $3, $4, $5) RETURNING *";
        let id = ids::new_id(ids::PLATFORM_KEY);
        on_pool!(self, |p| sqlx::query_as::<_, PlatformKey>(sql)
            .bind(&id)
            .bind(prefix)
            .bind(key_hash)
            .bind(now.millis())
            .bind(name)
            .fetch_one(p)
            .await)
        .map_err(|e| conflict_as(e, "a platform key with this hash"))
    }

    /// A platform key that exists and is not revoked.
    pub async fn active_platform_key(&self, key_hash: &str) -> Result<PlatformKey> {
        let sql = "SELECT * FROM platform_keys WHERE key_hash = $1 AND revoked_at IS NULL";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, PlatformKey>(sql)
            .bind(key_hash)
            .fetch_one(p)
            .await)?)
    }

    pub async fn list_platform_keys(&self) -> Result<Vec<PlatformKey>> {
        let sql = "SELECT * FROM platform_keys ORDER BY created_at DESC, id";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, PlatformKey>(sql)
            .fetch_all(p)
            .await)?)
    }

    pub async fn revoke_platform_key(&self, id: &str, now: Timestamp) -> Result<()> {
        let sql = "UPDATE platform_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL";
        let done = on_pool!(self, |p| sqlx::query(sql)
            .bind(now.millis())
            .bind(id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        expect_one(done)
    }

    /// Records that a key was used at `now`; a platform key's id names
    /// its table. Leaves a later time in place, and a revoked key as it
    /// was (ingest may take one from a node's memory before its write
    /// refuses it).
    pub async fn key_used(&self, platform: bool, id: &str, now: Timestamp) -> Result<()> {
        let sql = if platform {
            "UPDATE platform_keys SET last_used_at = $1 \
             WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1) \
               AND revoked_at IS NULL"
        } else {
            "UPDATE api_keys SET last_used_at = $1 \
             WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1) \
               AND revoked_at IS NULL"
        };
        on_pool!(self, |p| sqlx::query(sql)
            .bind(now.millis())
            .bind(id)
            .execute(p)
            .await
            .map(|_| ()))?;
        Ok(())
    }
}
