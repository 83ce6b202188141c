//! Accounts (tenants): created, found by id, name or the platform's
//! external id, listed, changed, and deleted in batches.

use super::{conflict_as, Account, Pool, Result, Store};
use crate::{clock::Timestamp, ids};

impl Store {
    pub async fn create_account(&self, name: &str, now: Timestamp) -> Result<Account> {
        self.create_account_with(name, None, now).await
    }

    /// A new account, with the platform's own id for it if given; names and
    /// external ids are each unique.
    pub async fn create_account_with(
        &self,
        name: &str,
        external_id: Option<&str>,
        now: Timestamp,
    ) -> Result<Account> {
        let sql = "INSERT INTO accounts (id, name, external_id, created_at) \
                   VALUES ($1, $2, $3, $4) RETURNING *";
        let id = ids::new_id(ids::ACCOUNT);
        on_pool!(self, |p| sqlx::query_as::<_, Account>(sql)
            .bind(&id)
            .bind(name)
            .bind(external_id)
            .bind(now.millis())
            .fetch_one(p)
            .await)
        .map_err(|e| conflict_as(e, "an account with this name or external_id"))
    }

    /// The account a platform names: its Dakghar id or its external id.
    pub async fn account_by_ref(&self, reference: &str) -> Result<Account> {
        let sql = "SELECT * FROM accounts WHERE id = $1 OR external_id = $1 \
                   ORDER BY CASE WHEN id = $1 THEN 0 ELSE 1 END LIMIT 1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Account>(sql)
            .bind(reference)
            .fetch_one(p)
            .await)?)
    }

    /// A page of accounts in creation order, after `(created_at, id)`.
    pub async fn accounts_page(
        &self,
        after: Option<&(i64, String)>,
        limit: i64,
    ) -> Result<Vec<Account>> {
        let sql = "SELECT * FROM accounts \
                   WHERE ($1 IS NULL OR created_at > $1 OR (created_at = $1 AND id > $2)) \
                   ORDER BY created_at, id LIMIT $3";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Account>(sql)
            .bind(after.map(|(at, _)| *at))
            .bind(after.map(|(_, id)| id.as_str()))
            .bind(limit)
            .fetch_all(p)
            .await)?)
    }

    /// Renames the account or sets its external id (`Some(None)` clears it).
    pub async fn update_account(
        &self,
        id: &str,
        name: Option<&str>,
        external_id: Option<Option<&str>>,
    ) -> Result<Account> {
        let sql = "UPDATE accounts SET name = COALESCE($1, name), \
                   external_id = CASE WHEN $2 THEN $3 ELSE external_id END \
                   WHERE id = $4 RETURNING *";
        on_pool!(self, |p| sqlx::query_as::<_, Account>(sql)
            .bind(name)
            .bind(external_id.is_some())
            .bind(external_id.flatten())
            .bind(id)
            .fetch_one(p)
            .await)
        .map_err(|e| conflict_as(e, "an account with this name or external_id"))
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
}

/// What deleting an account removed, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deleted {
    pub events: u64,
    pub deliveries: u64,
    pub attempts: u64,
    pub endpoints: u64,
    pub users: u64,
}

impl Store {
    /// Deletes the account and everything of it, a batch at a time; its
    /// keys and links go first, so nothing new arrives meanwhile.
    pub async fn delete_account(&self, id: &str) -> Result<Deleted> {
        self.account(id).await?;
        let mut gone = Deleted::default();
        for sql in [
            "DELETE FROM api_keys WHERE account_id = $1",
            "DELETE FROM access_links WHERE account_id = $1",
            "DELETE FROM portal_sessions WHERE account_id = $1",
        ] {
            self.delete_rows(sql, id).await?;
        }
        // Endpoint by endpoint: on Postgres deliveries and attempts do not
        // follow their endpoint by cascade (migration 0022), and each
        // endpoint's purge takes what an ingest or a worker wrote meanwhile.
        // Every delivery of the account is one of its endpoints'.
        loop {
            let endpoints: Vec<String> = on_writer!(self, |p| sqlx::query_scalar(
                "SELECT id FROM endpoints WHERE account_id = $1 ORDER BY id LIMIT $2"
            )
            .bind(id)
            .bind(super::DELETE_BATCH)
            .fetch_all(p)
            .await)?;
            if endpoints.is_empty() {
                break;
            }
            for endpoint in &endpoints {
                on_writer!(self, |p| sqlx::query(
                    "UPDATE endpoints SET state = 'disabled' WHERE id = $1"
                )
                .bind(endpoint)
                .execute(p)
                .await
                .map(|_| ()))?;
                let (deliveries, attempts) = self.purge_endpoint(endpoint).await?;
                gone.deliveries += deliveries;
                gone.attempts += attempts;
                gone.endpoints += 1;
            }
        }
        gone.events = self
            .delete_in_batches(
                "DELETE FROM events WHERE account_id = $1 AND id IN \
                 (SELECT id FROM events WHERE account_id = $1 LIMIT $2)",
                id,
            )
            .await?;
        self.delete_in_batches(
            "DELETE FROM notifications WHERE id IN \
             (SELECT id FROM notifications WHERE account_id = $1 LIMIT $2)",
            id,
        )
        .await?;
        gone.users = self
            .delete_rows("DELETE FROM users WHERE account_id = $1", id)
            .await?;
        self.delete_rows("DELETE FROM accounts WHERE id = $1", id)
            .await?;
        Ok(gone)
    }

    async fn delete_rows(&self, sql: &str, id: &str) -> Result<u64> {
        Ok(on_writer!(self, |p| sqlx::query(sql)
            .bind(id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?)
    }
}
