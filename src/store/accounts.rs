//! Accounts (tenants), their dashboard users and their API keys.

use super::{conflict_as, expect_one, Account, ApiKey, Pool, Result, Role, Store, User};
use crate::{clock::Timestamp, ids};

impl Store {
    pub async fn create_account(&self, name: &str, now: Timestamp) -> Result<Account> {
        let sql = "INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, $3) RETURNING *";
        let id = ids::new_id(ids::ACCOUNT);
        on_pool!(self, |p| sqlx::query_as::<_, Account>(sql)
            .bind(&id)
            .bind(name)
            .bind(now.millis())
            .fetch_one(p)
            .await)
        .map_err(|e| conflict_as(e, "an account with this name"))
    }

    pub async fn account(&self, id: &str) -> Result<Account> {
        let sql = "SELECT * FROM accounts WHERE id = $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Account>(sql)
            .bind(id)
            .fetch_one(p)
            .await)?)
    }

    pub async fn account_by_name(&self, name: &str) -> Result<Account> {
        let sql = "SELECT * FROM accounts WHERE name = $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Account>(sql)
            .bind(name)
            .fetch_one(p)
            .await)?)
    }

    pub async fn list_accounts(&self) -> Result<Vec<Account>> {
        let sql = "SELECT * FROM accounts ORDER BY name";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Account>(sql)
            .fetch_all(p)
            .await)?)
    }

    // ---- users -----------------------------------------------------------

    pub async fn create_user(
        &self,
        account_id: &str,
        email: &str,
        password_hash: &str,
        role: Role,
        now: Timestamp,
    ) -> Result<User> {
        let sql = "INSERT INTO users (id, account_id, email, password_hash, role, created_at) \
                   VALUES ($1, $2, $3, $4, $5, $6) RETURNING *";
        let id = ids::new_id(ids::USER);
        on_pool!(self, |p| sqlx::query_as::<_, User>(sql)
            .bind(&id)
            .bind(account_id)
            .bind(email)
            .bind(password_hash)
            .bind(role.as_str())
            .bind(now.millis())
            .fetch_one(p)
            .await)
        .map_err(|e| conflict_as(e, "a user with this email"))
    }

    pub async fn user(&self, id: &str) -> Result<User> {
        let sql = "SELECT * FROM users WHERE id = $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, User>(sql)
            .bind(id)
            .fetch_one(p)
            .await)?)
    }

    pub async fn user_by_email(&self, email: &str) -> Result<User> {
        let sql = "SELECT * FROM users WHERE email = $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, User>(sql)
            .bind(email)
            .fetch_one(p)
            .await)?)
    }

    pub async fn set_password(&self, user_id: &str, password_hash: &str) -> Result<()> {
        let sql = "UPDATE users SET password_hash = $1 WHERE id = $2";
        let n = on_pool!(self, |p| sqlx::query(sql)
            .bind(password_hash)
            .bind(user_id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        expect_one(n)
    }

    pub async fn count_users(&self) -> Result<i64> {
        let sql = "SELECT COUNT(*) FROM users";
        Ok(on_pool!(self, |p| sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(p)
            .await)?)
    }

    // ---- API keys --------------------------------------------------------

    pub async fn create_api_key(
        &self,
        account_id: &str,
        prefix: &str,
        key_hash: &str,
        is_admin: bool,
        now: Timestamp,
    ) -> Result<ApiKey> {
        let sql = "INSERT INTO api_keys (id, account_id, prefix, key_hash, is_admin, created_at) \
                   VALUES ($1, $2, $3, $4, $5, $6) RETURNING *";
        let id = ids::new_id(ids::API_KEY);
        on_pool!(self, |p| sqlx::query_as::<_, ApiKey>(sql)
            .bind(&id)
            .bind(account_id)
            .bind(prefix)
            .bind(key_hash)
            .bind(is_admin)
            .bind(now.millis())
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
}
