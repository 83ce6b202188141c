//! Single-use links (invitations, password resets, portal links) and the
//! portal sessions they open. Using a link and what it grants happen in
//! one transaction, so a link works once even with two clicks at once.

use super::{
    conflict_as, AccessLink, AccountRole, LinkKind, Pool, PortalSession, Result, Role, Store,
    StoreError, User,
};
use crate::{clock::Timestamp, ids};

/// A link to create; its secret is the caller's, only its hash is kept.
#[derive(Debug, Clone)]
pub struct NewLink<'a> {
    pub kind: LinkKind,
    pub account_id: &'a str,
    pub user_id: Option<&'a str>,
    pub email: Option<&'a str>,
    pub role: Option<AccountRole>,
    pub return_url: Option<&'a str>,
    pub created_by: &'a str,
    pub expires_at: Timestamp,
}

/// Marks the link used, if it is this kind, unused and unexpired.
const USE: &str = "UPDATE access_links SET used_at = $1 \
                   WHERE id = $2 AND kind = $3 AND used_at IS NULL AND expires_at > $1 \
                   RETURNING *";

impl Store {
    pub async fn create_link(
        &self,
        new: &NewLink<'_>,
        secret_hash: &str,
        now: Timestamp,
    ) -> Result<AccessLink> {
        let sql = "INSERT INTO access_links (id, kind, secret_hash, account_id, user_id, email, \
                   role, return_url, created_by, created_at, expires_at) \
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING *";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, AccessLink>(sql)
            .bind(ids::new_id(ids::LINK))
            .bind(new.kind.as_str())
            .bind(secret_hash)
            .bind(new.account_id)
            .bind(new.user_id)
            .bind(new.email)
            .bind(new.role.map(AccountRole::as_str))
            .bind(new.return_url)
            .bind(new.created_by)
            .bind(now.millis())
            .bind(new.expires_at.millis())
            .fetch_one(p)
            .await)?)
    }

    pub async fn link(&self, id: &str) -> Result<AccessLink> {
        let sql = "SELECT * FROM access_links WHERE id = $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, AccessLink>(sql)
            .bind(id)
            .fetch_one(p)
            .await)?)
    }

    /// Invitations of the account not yet used nor expired, newest first.
    pub async fn open_invitations(
        &self,
        account_id: &str,
        now: Timestamp,
    ) -> Result<Vec<AccessLink>> {
        let sql = "SELECT * FROM access_links WHERE account_id = $1 AND kind = 'invitation' \
                   AND used_at IS NULL AND expires_at > $2 ORDER BY created_at DESC, id";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, AccessLink>(sql)
            .bind(account_id)
            .bind(now.millis())
            .fetch_all(p)
            .await)?)
    }

    /// Withdraws an open invitation of the account.
    pub async fn withdraw_invitation(
        &self,
        account_id: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<()> {
        let sql = "UPDATE access_links SET used_at = $1 WHERE account_id = $2 AND id = $3 \
                   AND kind = 'invitation' AND used_at IS NULL";
        let n = on_pool!(self, |p| sqlx::query(sql)
            .bind(now.millis())
            .bind(account_id)
            .bind(id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        super::expect_one(n)
    }

    /// Uses the invitation and creates its user with this password; `NotFound`
    /// when the link was used or has expired.
    pub async fn accept_invitation(
        &self,
        id: &str,
        password_hash: &str,
        now: Timestamp,
    ) -> Result<User> {
        let insert = "INSERT INTO users (id, account_id, email, password_hash, role, created_at, \
                      account_role) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *";
        on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            let link = sqlx::query_as::<_, AccessLink>(USE)
                .bind(now.millis())
                .bind(id)
                .bind(LinkKind::Invitation.as_str())
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::NotFound)?;
            let user = sqlx::query_as::<_, User>(insert)
                .bind(ids::new_id(ids::USER))
                .bind(&link.account_id)
                .bind(&link.email)
                .bind(password_hash)
                .bind(Role::Member.as_str())
                .bind(now.millis())
                .bind(link.role.as_deref().unwrap_or(AccountRole::Viewer.as_str()))
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| conflict_as(e, "a user with this email"))?;
            tx.commit().await?;
            Ok(user)
        })
    }

    /// Uses the reset link: a new password, and every session of the user
    /// signed in before it ends, as does every other reset link still
    /// open for them. `NotFound` when used or expired.
    pub async fn use_password_reset(
        &self,
        id: &str,
        password_hash: &str,
        now: Timestamp,
    ) -> Result<User> {
        let reset = "UPDATE users SET password_hash = $1, session_epoch = session_epoch + 1 \
                     WHERE id = $2 RETURNING *";
        let others = "UPDATE access_links SET used_at = $1 \
                      WHERE kind = 'password_reset' AND user_id = $2 AND used_at IS NULL";
        on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            let link = sqlx::query_as::<_, AccessLink>(USE)
                .bind(now.millis())
                .bind(id)
                .bind(LinkKind::PasswordReset.as_str())
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::NotFound)?;
            let user = sqlx::query_as::<_, User>(reset)
                .bind(password_hash)
                .bind(&link.user_id)
                .fetch_one(&mut *tx)
                .await?;
            sqlx::query(others)
                .bind(now.millis())
                .bind(&link.user_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(user)
        })
    }

    /// Uses the portal link and opens a session known by `session_hash`
    /// until the link's ttl. `NotFound` when used or expired.
    pub async fn open_portal(
        &self,
        id: &str,
        session_hash: &str,
        now: Timestamp,
    ) -> Result<PortalSession> {
        let insert =
            "INSERT INTO portal_sessions (id_hash, link_id, account_id, role, return_url, \
                      expires_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING *";
        on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            let link = sqlx::query_as::<_, AccessLink>(USE)
                .bind(now.millis())
                .bind(id)
                .bind(LinkKind::Portal.as_str())
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::NotFound)?;
            let session = sqlx::query_as::<_, PortalSession>(insert)
                .bind(session_hash)
                .bind(&link.id)
                .bind(&link.account_id)
                .bind(link.role.as_deref().unwrap_or(AccountRole::Viewer.as_str()))
                .bind(&link.return_url)
                .bind(link.expires_at)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(session)
        })
    }

    /// The portal session a browser's cookie names, while it lasts.
    pub async fn portal_session(
        &self,
        session_hash: &str,
        now: Timestamp,
    ) -> Result<PortalSession> {
        let sql = "SELECT * FROM portal_sessions WHERE id_hash = $1 AND expires_at > $2";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, PortalSession>(sql)
            .bind(session_hash)
            .bind(now.millis())
            .fetch_one(p)
            .await)?)
    }

    pub async fn end_portal_session(&self, session_hash: &str) -> Result<()> {
        let sql = "DELETE FROM portal_sessions WHERE id_hash = $1";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(session_hash)
            .execute(p)
            .await
            .map(|_| ()))?;
        Ok(())
    }

    /// Forgets links and portal sessions that ended before `before`.
    pub async fn delete_expired_links(&self, before: Timestamp) -> Result<u64> {
        let mut n = 0;
        for sql in [
            "DELETE FROM portal_sessions WHERE expires_at <= $1",
            "DELETE FROM access_links WHERE expires_at <= $1",
        ] {
            n += on_pool!(self, |p| sqlx::query(sql)
                .bind(before.millis())
                .execute(p)
                .await
                .map(|r| r.rows_affected()))?;
        }
        Ok(n)
    }
}
