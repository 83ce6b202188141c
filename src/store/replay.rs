//! Replay (SPEC §5): resending one delivery, the audit log, and bulk
//! replay: preview what matches, reset it in batches with
//! the retries spread over a window and within each endpoint's rate limit,
//! count progress, and cancel what has not been attempted yet.

use std::collections::HashMap;

use sqlx::FromRow;

use super::{Delivery, Pool, Replay, Result, Store, StoreError};
use crate::{clock::Timestamp, ids};

/// Which deliveries to replay: dead letters, and waiting ones (a fresh
/// retry window, for a paused backlog). Times are the deliveries'
/// `created_at`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplayCriteria {
    pub failed: bool,
    pub expired: bool,
    /// Stored criteria from before this existed read as `false`.
    #[serde(default)]
    pub pending: bool,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub account_id: Option<String>,
    pub endpoint_id: Option<String>,
    pub event_type: Option<String>,
}

/// Who starts a replay, of which kind (`bulk`, `recover`), and its timing.
#[derive(Debug, Clone, Copy)]
pub struct ReplayRun<'a> {
    pub actor: &'a str,
    pub kind: &'a str,
    /// Spread the next attempts over this, from `starts_at`.
    pub window: std::time::Duration,
    /// Each reset delivery's fresh retry window.
    pub retry_window: std::time::Duration,
    pub now: Timestamp,
    pub starts_at: Timestamp,
}

/// One line of a preview: how many of an endpoint's deliveries match.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct ReplayGroup {
    pub account_id: String,
    pub account_name: String,
    pub endpoint_id: String,
    pub endpoint_url: String,
    pub count: i64,
}

/// Where a replay's deliveries are now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayProgress {
    pub pending: i64,
    pub in_flight: i64,
    pub delivered: i64,
    pub failed: i64,
    pub expired: i64,
}

/// Rows reset per transaction: 50 k deliveries never sit in one.
const BATCH: i64 = 500;

const MATCHES: &str = "FROM deliveries d \
     JOIN events ev ON ev.account_id = d.account_id AND ev.id = d.event_id \
     JOIN endpoints en ON en.id = d.endpoint_id \
     JOIN accounts a ON a.id = d.account_id \
     WHERE ((d.state = 'failed' AND $1) OR (d.state = 'expired' AND $2) \
            OR (d.state = 'pending' AND $8)) \
       AND ($3 IS NULL OR d.created_at >= $3) AND ($4 IS NULL OR d.created_at < $4) \
       AND ($5 IS NULL OR d.account_id = $5) AND ($6 IS NULL OR d.endpoint_id = $6) \
       AND ($7 IS NULL OR ev.event_type = $7)";

/// Binds `MATCHES`'s eight parameters, in their order, from the criteria.
macro_rules! with_criteria {
    ($query:expr, $c:expr) => {
        $query
            .bind($c.failed)
            .bind($c.expired)
            .bind($c.since)
            .bind($c.until)
            .bind(&$c.account_id)
            .bind(&$c.endpoint_id)
            .bind(&$c.event_type)
            .bind($c.pending)
    };
}

#[derive(FromRow)]
struct Candidate {
    id: String,
    endpoint_id: String,
    rate_limit_per_sec: Option<i64>,
}

impl Store {
    pub async fn replay_preview(&self, c: &ReplayCriteria) -> Result<Vec<ReplayGroup>> {
        let sql = format!(
            "SELECT d.account_id, a.name AS account_name, d.endpoint_id, en.url AS endpoint_url, \
                    count(*) AS count {MATCHES} \
             GROUP BY d.account_id, a.name, d.endpoint_id, en.url \
             ORDER BY count(*) DESC, d.endpoint_id"
        );
        Ok(on_pool!(self, |p| with_criteria!(
            sqlx::query_as::<_, ReplayGroup>(&sql),
            c
        )
        .fetch_all(p)
        .await)?)
    }

    /// How many deliveries match, over every endpoint.
    pub async fn replay_total(&self, c: &ReplayCriteria) -> Result<i64> {
        Ok(self.replay_preview(c).await?.iter().map(|g| g.count).sum())
    }

    /// Resets every matching delivery like a resend, spreading their next
    /// attempts evenly over `window` from `starts_at` and, per endpoint, no
    /// faster than its rate limit. Writes the audit row first (status `running`) and
    /// returns it with the final count. Accounts affected are returned with
    /// how many of theirs were replayed, for the notification.
    pub async fn start_replay(
        &self,
        c: &ReplayCriteria,
        run: ReplayRun<'_>,
    ) -> Result<(Replay, HashMap<String, i64>)> {
        let ReplayRun {
            actor,
            kind,
            window,
            retry_window,
            now,
            starts_at,
        } = run;
        if let Some(account) = &c.account_id {
            self.account(account).await?;
        }
        let total = self.replay_total(c).await?;
        let id = ids::new_id(ids::REPLAY);
        let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
        let criteria = serde_json::to_string(c).unwrap_or_default();
        let audit =
            "INSERT INTO replays (id, account_id, actor, kind, criteria, count, created_at, \
                     status, window_ms) VALUES ($1, $2, $3, $8, $4, $5, $6, 'running', $7)";
        on_pool!(self, |p| sqlx::query(audit)
            .bind(&id)
            .bind(&c.account_id)
            .bind(actor)
            .bind(&criteria)
            .bind(total)
            .bind(now.millis())
            .bind(window_ms)
            .bind(kind)
            .execute(p)
            .await
            .map(|_| ()))?;

        let select = format!(
            // A delivery this replay already reset may fail again meanwhile: skip it.
            "SELECT d.id, d.endpoint_id, en.rate_limit_per_sec {MATCHES} \
             AND (d.replay_id IS NULL OR d.replay_id <> $10) ORDER BY d.id LIMIT $9"
        );
        let reset = "UPDATE deliveries SET state = 'pending', attempts = 0, next_attempt_at = $1, \
                     give_up_at = $2, last_error = NULL, finished_at = NULL, updated_at = $3, \
                     replay_id = $4, replay_prev_state = state, replay_from_seq = attempt_seq, \
                     replay_prev_attempts = attempts, replay_prev_give_up_at = give_up_at, \
                     replay_prev_finished_at = finished_at, replay_prev_error = last_error \
                     WHERE id = $5 AND state IN ('failed', 'expired', 'pending') RETURNING account_id";
        let give_up = starts_at.plus(retry_window).millis();
        let mut done: i64 = 0;
        let mut per_endpoint: HashMap<String, i64> = HashMap::new();
        let mut per_account: HashMap<String, i64> = HashMap::new();
        loop {
            let batch = on_pool!(self, |p| with_criteria!(
                sqlx::query_as::<_, Candidate>(&select),
                c
            )
            .bind(BATCH)
            .bind(&id)
            .fetch_all(p)
            .await)?;
            if batch.is_empty() {
                break;
            }
            let planned: Vec<(String, i64)> = batch
                .iter()
                .map(|cand| {
                    let spread = window_ms.saturating_mul(done) / total.max(1);
                    done += 1;
                    let nth = per_endpoint.entry(cand.endpoint_id.clone()).or_insert(0);
                    let paced = cand
                        .rate_limit_per_sec
                        .filter(|r| *r > 0)
                        .map_or(0, |r| nth.saturating_mul(1000) / r);
                    *nth += 1;
                    (cand.id.clone(), starts_at.millis() + spread.max(paced))
                })
                .collect();
            let accounts = on_pool!(self, |p| {
                let mut tx = p.begin().await?;
                let mut accounts = Vec::with_capacity(planned.len());
                for (delivery, at) in &planned {
                    let account: Option<String> = sqlx::query_scalar(reset)
                        .bind(at)
                        .bind(give_up)
                        .bind(now.millis())
                        .bind(&id)
                        .bind(delivery)
                        .fetch_optional(&mut *tx)
                        .await?;
                    accounts.extend(account);
                }
                tx.commit().await?;
                Ok::<_, StoreError>(accounts)
            })?;
            for account in accounts {
                *per_account.entry(account).or_insert(0) += 1;
            }
        }
        let count: i64 = per_account.values().sum();
        let finish = "UPDATE replays SET count = $1 WHERE id = $2 RETURNING *";
        let replay = on_pool!(self, |p| sqlx::query_as::<_, Replay>(finish)
            .bind(count)
            .bind(&id)
            .fetch_one(p)
            .await)?;
        Ok((replay, per_account))
    }

    /// Marks running replays (one, or all) whose deliveries have all been
    /// attempted as `done`. Returns how many.
    pub async fn finish_replays(&self, only: Option<&str>) -> Result<u64> {
        let sql = "UPDATE replays SET status = 'done' \
                   WHERE status = 'running' AND ($1 IS NULL OR id = $1) \
                     AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.replay_id = replays.id \
                       AND d.state IN ('pending', 'in_flight'))";
        Ok(on_pool!(self, |p| sqlx::query(sql)
            .bind(only)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?)
    }

    pub async fn replay(&self, id: &str) -> Result<Replay> {
        let sql = "SELECT * FROM replays WHERE id = $1";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Replay>(sql)
            .bind(id)
            .fetch_one(p)
            .await)?)
    }

    pub async fn replay_progress(&self, id: &str) -> Result<ReplayProgress> {
        let sql = "SELECT state, count(*) FROM deliveries WHERE replay_id = $1 GROUP BY state";
        let rows: Vec<(String, i64)> =
            on_pool!(self, |p| sqlx::query_as(sql).bind(id).fetch_all(p).await)?;
        let mut progress = ReplayProgress::default();
        for (state, n) in rows {
            match state.as_str() {
                "pending" => progress.pending = n,
                "in_flight" => progress.in_flight = n,
                "delivered" => progress.delivered = n,
                "failed" => progress.failed = n,
                "expired" => progress.expired = n,
                _ => {}
            }
        }
        Ok(progress)
    }

    /// Returns the replay's deliveries that have not been attempted since it
    /// started to the dead-letter state they came from. Returns how many.
    pub async fn cancel_replay(&self, id: &str, now: Timestamp) -> Result<u64> {
        // Exactly as before the replay: the same dead letter, not a new one
        // (a fresh finished_at would count as a new expiry in the alerts).
        // Only what nothing touched since the replay reset it (its
        // updated_at is still the replay's): a delivery that was claimed
        // and came back without a recorded attempt (its node died, its
        // result was lost) may have reached the receiver, so it stays.
        let revert = "UPDATE deliveries SET state = replay_prev_state, \
                        attempts = replay_prev_attempts, give_up_at = replay_prev_give_up_at, \
                        finished_at = CASE WHEN replay_prev_state = 'pending' THEN NULL \
                          ELSE COALESCE(replay_prev_finished_at, $1) END, \
                        last_error = replay_prev_error, \
                        updated_at = $1 \
                      WHERE replay_id = $2 AND state = 'pending' AND attempt_seq = replay_from_seq \
                        AND updated_at = (SELECT created_at FROM replays WHERE id = $2)";
        let mark = "UPDATE replays SET status = 'cancelled' WHERE id = $1 AND kind = 'bulk'";
        on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            let reverted = sqlx::query(revert)
                .bind(now.millis())
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            let marked = sqlx::query(mark)
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if marked == 0 {
                tx.rollback().await?;
                return Err(StoreError::NotFound);
            }
            tx.commit().await?;
            Ok(reverted)
        })
    }

    /// Resend (SPEC §5): from delivered, failed or expired back to pending,
    /// due now, with a fresh deadline and backoff counter; history is kept.
    /// A pending delivery of a paused endpoint gets the same fresh start.
    /// The audit row by `actor` is written in the same transaction.
    pub async fn resend_delivery(
        &self,
        account_id: &str,
        id: &str,
        actor: &str,
        give_up_at: Timestamp,
        now: Timestamp,
    ) -> Result<Delivery> {
        let sql = "UPDATE deliveries SET state = 'pending', attempts = 0, next_attempt_at = $1, \
                   give_up_at = $2, last_error = NULL, finished_at = NULL, updated_at = $1 \
                   WHERE account_id = $3 AND id = $4 \
                   AND (state IN ('delivered', 'failed', 'expired') OR (state = 'pending' \
                     AND endpoint_id IN (SELECT id FROM endpoints WHERE state = 'paused'))) \
                   RETURNING *";
        let audit =
            "INSERT INTO replays (id, account_id, actor, kind, criteria, count, created_at) \
                     VALUES ($1, $2, $3, 'single', $4, 1, $5)";
        let criteria = serde_json::json!({ "delivery_id": id }).to_string();
        let updated = on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            let updated = sqlx::query_as::<_, Delivery>(sql)
                .bind(now.millis())
                .bind(give_up_at.millis())
                .bind(account_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
            if updated.is_some() {
                sqlx::query(audit)
                    .bind(ids::new_id(ids::REPLAY))
                    .bind(account_id)
                    .bind(actor)
                    .bind(&criteria)
                    .bind(now.millis())
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
            }
            Ok::<_, StoreError>(updated)
        })?;
        match updated {
            Some(d) => Ok(d),
            None => {
                // Tell "no such delivery" from "not in a state that can be resent".
                self.account_delivery(account_id, id).await?;
                Err(StoreError::Conflict(
                    "a pending or in-flight attempt for this delivery",
                ))
            }
        }
    }

    /// The audit log, newest first: one account's, or everyone's for admins.
    pub async fn replays(&self, account_id: Option<&str>, limit: i64) -> Result<Vec<Replay>> {
        let sql = "SELECT * FROM replays WHERE ($1 IS NULL OR account_id = $1) \
                   ORDER BY created_at DESC, id DESC LIMIT $2";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Replay>(sql)
            .bind(account_id)
            .bind(limit)
            .fetch_all(p)
            .await)?)
    }
}
