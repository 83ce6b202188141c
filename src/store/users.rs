//! Dashboard users: each belongs to one account, with a role in it.

use super::{conflict_as, expect_one, AccountRole, Pool, Result, Role, Store, StoreError, User};
use crate::{clock::Timestamp, ids};

/// What [`Store::change_member`] did.
#[derive(Debug)]
pub enum TeamChange {
    /// The member as they are now; `None` once removed.
    Changed(Option<User>),
    /// Nothing: they are the account's last owner.
    LastOwner,
}

impl Store {
    /// A user who owns their account (the command line's, the first admin).
    pub async fn create_user(
        &self,
        account_id: &str,
        email: &str,
        password_hash: &str,
        role: Role,
        now: Timestamp,
    ) -> Result<User> {
        self.create_member(
            account_id,
            email,
            password_hash,
            role,
            AccountRole::Owner,
            now,
        )
        .await
    }

    pub async fn create_member(
        &self,
        account_id: &str,
        email: &str,
        password_hash: &str,
        role: Role,
        account_role: AccountRole,
        now: Timestamp,
    ) -> Result<User> {
        let sql = "INSERT INTO users (id, account_id, email, password_hash, role, created_at, \
                   account_role) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *";
        let id = ids::new_id(ids::USER);
        on_pool!(self, |p| sqlx::query_as::<_, User>(sql)
            .bind(&id)
            .bind(account_id)
            .bind(email)
            .bind(password_hash)
            .bind(role.as_str())
            .bind(now.millis())
            .bind(account_role.as_str())
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

    /// The users of an account, by email.
    pub async fn account_users(&self, account_id: &str) -> Result<Vec<User>> {
        let sql = "SELECT * FROM users WHERE account_id = $1 ORDER BY email";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, User>(sql)
            .bind(account_id)
            .fetch_all(p)
            .await)?)
    }

    /// A user of this account; another account's is not found.
    pub async fn account_user(&self, account_id: &str, id: &str) -> Result<User> {
        let sql = "SELECT * FROM users WHERE account_id = $1 AND id = $2";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, User>(sql)
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?)
    }

    /// Gives the member `role`, or removes them (`None`), unless that
    /// takes away the account's last owner: `Ok(TeamChange::LastOwner)`
    /// then, and nothing changes. The account's row is locked first (on
    /// both backends an UPDATE holds it to the end of the transaction),
    /// so two owners demoting each other at once cannot both win.
    pub async fn change_member(
        &self,
        account_id: &str,
        id: &str,
        role: Option<AccountRole>,
    ) -> Result<TeamChange> {
        let lock = "UPDATE accounts SET name = name WHERE id = $1";
        let current = "SELECT * FROM users WHERE account_id = $1 AND id = $2";
        let owners = "SELECT count(*) FROM users WHERE account_id = $1 AND account_role = 'owner'";
        let set =
            "UPDATE users SET account_role = $1 WHERE account_id = $2 AND id = $3 RETURNING *";
        let delete = "DELETE FROM users WHERE account_id = $1 AND id = $2";
        on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            let n = sqlx::query(lock)
                .bind(account_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            expect_one(n)?;
            let member = sqlx::query_as::<_, User>(current)
                .bind(account_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::NotFound)?;
            if member.account_role == AccountRole::Owner && role != Some(AccountRole::Owner) {
                let n: i64 = sqlx::query_scalar(owners)
                    .bind(account_id)
                    .fetch_one(&mut *tx)
                    .await?;
                if n <= 1 {
                    return Ok(TeamChange::LastOwner);
                }
            }
            let changed = match role {
                Some(role) => TeamChange::Changed(Some(
                    sqlx::query_as::<_, User>(set)
                        .bind(role.as_str())
                        .bind(account_id)
                        .bind(id)
                        .fetch_one(&mut *tx)
                        .await?,
                )),
                None => {
                    sqlx::query(delete)
                        .bind(account_id)
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                    TeamChange::Changed(None)
                }
            };
            tx.commit().await?;
            Ok(changed)
        })
    }

    /// Deletes the user; their sessions open nothing from then on.
    pub async fn delete_user(&self, id: &str) -> Result<()> {
        let sql = "DELETE FROM users WHERE id = $1";
        let n = on_pool!(self, |p| sqlx::query(sql)
            .bind(id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        expect_one(n)
    }

    /// A new password, and every session signed in before it ends.
    pub async fn reset_password(&self, user_id: &str, password_hash: &str) -> Result<User> {
        let sql = "UPDATE users SET password_hash = $1, session_epoch = session_epoch + 1 \
                   WHERE id = $2 RETURNING *";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, User>(sql)
            .bind(password_hash)
            .bind(user_id)
            .fetch_one(p)
            .await)?)
    }
}
