//! The notification outbox: alerts written for an account, and their
//! sending state when SMTP is configured.

use super::{Notification, Pool, Result, Store};
use crate::{clock::Timestamp, ids};

impl Store {
    /// An alert for every user of the account.
    pub async fn add_notification(
        &self,
        account_id: &str,
        endpoint_id: Option<&str>,
        kind: &str,
        subject: &str,
        body: &str,
        now: Timestamp,
    ) -> Result<Notification> {
        self.queue_email(account_id, endpoint_id, None, kind, subject, body, now)
            .await
    }

    /// An email to one person about the account (an invitation, a reset);
    /// it never shows on the account's notifications page.
    pub async fn add_personal_email(
        &self,
        account_id: &str,
        recipient: &str,
        kind: &str,
        subject: &str,
        body: &str,
        now: Timestamp,
    ) -> Result<Notification> {
        self.queue_email(account_id, None, Some(recipient), kind, subject, body, now)
            .await
    }

    #[allow(clippy::too_many_arguments)] // the columns of one row
    async fn queue_email(
        &self,
        account_id: &str,
        endpoint_id: Option<&str>,
        recipient: Option<&str>,
        kind: &str,
        subject: &str,
        body: &str,
        now: Timestamp,
    ) -> Result<Notification> {
        let sql = "INSERT INTO notifications (id, account_id, endpoint_id, recipient, kind, \
                   subject, body, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Notification>(sql)
            .bind(ids::new_id(ids::NOTIFICATION))
            .bind(account_id)
            .bind(endpoint_id)
            .bind(recipient)
            .bind(kind)
            .bind(subject)
            .bind(body)
            .bind(now.millis())
            .fetch_one(p)
            .await)?)
    }

    pub async fn notifications(&self, account_id: &str) -> Result<Vec<Notification>> {
        let sql = "SELECT * FROM notifications WHERE account_id = $1 AND recipient IS NULL \
                   ORDER BY created_at DESC, id";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Notification>(sql)
            .bind(account_id)
            .fetch_all(p)
            .await)?)
    }

    pub async fn due_notifications(&self, now: Timestamp, limit: i64) -> Result<Vec<Notification>> {
        let sql = "SELECT * FROM notifications WHERE sent_at IS NULL \
                   AND (next_send_at IS NULL OR next_send_at <= $1) ORDER BY created_at, id LIMIT $2";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Notification>(sql)
            .bind(now.millis())
            .bind(limit)
            .fetch_all(p)
            .await)?)
    }

    pub async fn account_emails(&self, account_id: &str) -> Result<Vec<String>> {
        let sql = "SELECT email FROM users WHERE account_id = $1 ORDER BY email";
        Ok(on_pool!(self, |p| sqlx::query_scalar(sql)
            .bind(account_id)
            .fetch_all(p)
            .await)?)
    }

    /// Takes one notification for sending until `until`, so that of several
    /// nodes only one emails it; `false` if another node has it.
    pub async fn claim_notification(
        &self,
        id: &str,
        now: Timestamp,
        until: Timestamp,
    ) -> Result<bool> {
        let sql = "UPDATE notifications SET next_send_at = $1 WHERE id = $2 AND sent_at IS NULL \
                   AND (next_send_at IS NULL OR next_send_at <= $3)";
        let n = on_pool!(self, |p| sqlx::query(sql)
            .bind(until.millis())
            .bind(id)
            .bind(now.millis())
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Forgets personal emails written before `written_before`, sent or
    /// not: the link in each has ended, and no page shows them.
    pub async fn delete_personal_mail(&self, written_before: Timestamp) -> Result<u64> {
        let sql = "DELETE FROM notifications WHERE recipient IS NOT NULL AND created_at < $1";
        Ok(on_pool!(self, |p| sqlx::query(sql)
            .bind(written_before.millis())
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?)
    }

    /// Sent. A personal email's body goes: its link is the recipient's
    /// alone, and a copy in the database would outlive the need for it.
    pub async fn mark_sent(&self, id: &str, now: Timestamp) -> Result<()> {
        let sql = "UPDATE notifications SET sent_at = $1, last_send_error = NULL, \
                   body = CASE WHEN recipient IS NULL THEN body ELSE $3 END WHERE id = $2";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(now.millis())
            .bind(id)
            .bind("(sent; the link is not kept)")
            .execute(p)
            .await
            .map(|_| ()))?;
        Ok(())
    }

    pub async fn mark_send_failed(&self, id: &str, error: &str, retry_at: Timestamp) -> Result<()> {
        let sql = "UPDATE notifications SET send_attempts = send_attempts + 1, next_send_at = $1, \
                   last_send_error = $2 WHERE id = $3";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(retry_at.millis())
            .bind(error)
            .bind(id)
            .execute(p)
            .await
            .map(|_| ()))?;
        Ok(())
    }
}
