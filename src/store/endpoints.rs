//! Endpoints: creating and reading them, edits, pause/resume, secret rotation, and the health
//! bookkeeping (failure streaks, circuit breaker) the engine updates.

use std::sync::LazyLock;

use super::{sql::ENDPOINT_SUCCEEDED, Endpoint, EndpointState, Pool, Result, Store, StoreError};
use crate::{clock::Timestamp, ids};

/// What one failed attempt tells its endpoint.
#[derive(Debug, Clone, Copy)]
pub struct EndpointFailure {
    /// Grows the circuit breaker's streak.
    pub transient: bool,
    /// Grows the dead-endpoint streak.
    pub permanent: bool,
    /// Halves the adaptive in-flight cap (429, 503, timeout).
    pub slow_down: bool,
    /// A 429/503: grows the throttle streak.
    pub throttled: bool,
    pub started: Timestamp,
}

pub struct NewEndpoint {
    pub account_id: String,
    pub url: String,
    pub description: String,
    pub event_types: Vec<String>,
    pub secret: String,
    pub rate_limit_per_sec: Option<i64>,
    pub max_in_flight: i64,
    /// The endpoint's own retry policy; `None` is the installation's.
    pub retry_strategy: Option<String>,
    pub retry_statuses: Option<String>,
}

/// Fields a PATCH may change; `None` leaves the column as it is.
#[derive(Debug, Default)]
pub struct EndpointPatch {
    pub url: Option<String>,
    pub description: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub rate_limit_per_sec: Option<Option<i64>>,
    pub max_in_flight: Option<i64>,
    pub retry_strategy: Option<Option<String>>,
    pub retry_statuses: Option<Option<String>>,
}

/// The receiver a URL names, `host:port` (the scheme's port when none is
/// written), for the per-host cap: endpoints that differ only in path or
/// query share it.
pub fn receiver_host(url: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    let host = url.host_str()?.to_ascii_lowercase();
    Some(match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    })
}

impl Store {
    /// Writes `host` for endpoints stored before it existed (migration
    /// 0015): SQL cannot parse a URL on both backends, Rust can.
    pub(super) async fn backfill_hosts(&self) -> Result<()> {
        let rows: Vec<(String, String)> = on_pool!(self, |p| sqlx::query_as(
            "SELECT id, url FROM endpoints WHERE host IS NULL"
        )
        .fetch_all(p)
        .await)?;
        for (id, url) in rows {
            on_writer!(self, |p| sqlx::query(
                "UPDATE endpoints SET host = $1 WHERE id = $2"
            )
            .bind(receiver_host(&url).unwrap_or_else(|| id.clone()))
            .bind(&id)
            .execute(p)
            .await
            .map(|_| ()))?;
        }
        Ok(())
    }

    pub async fn create_endpoint(&self, new: NewEndpoint, now: Timestamp) -> Result<Endpoint> {
        let sql = "INSERT INTO endpoints (id, account_id, url, description, event_types, secret, \
                   rate_limit_per_sec, max_in_flight, created_at, updated_at, host, \
                   retry_strategy, retry_statuses) \
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $12) RETURNING *";
        let id = ids::new_id(ids::ENDPOINT);
        let types = serde_json::to_string(&new.event_types).unwrap_or_else(|_| "[]".into());
        let sealed = self.secrets_key()?.seal(&id, &new.secret);
        let ep = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(&id)
            .bind(&new.account_id)
            .bind(&new.url)
            .bind(&new.description)
            .bind(&types)
            .bind(&sealed)
            .bind(new.rate_limit_per_sec)
            .bind(new.max_in_flight)
            .bind(now.millis())
            .bind(receiver_host(&new.url))
            .bind(&new.retry_strategy)
            .bind(&new.retry_statuses)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
    }

    /// `create_endpoint` unless the account already has `most` endpoints:
    /// then `None`. Counted and inserted so that concurrent creations
    /// cannot pass the limit together (SQLite has one writer; Postgres
    /// locks the account's row first).
    pub async fn create_endpoint_within(
        &self,
        new: NewEndpoint,
        most: i64,
        now: Timestamp,
    ) -> Result<Option<Endpoint>> {
        let lock = "SELECT id FROM accounts WHERE id = $1 FOR UPDATE";
        let sql = "INSERT INTO endpoints (id, account_id, url, description, event_types, secret, \
                   rate_limit_per_sec, max_in_flight, created_at, updated_at, host, \
                   retry_strategy, retry_statuses) \
                   SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $12 \
                   WHERE (SELECT count(*) FROM endpoints WHERE account_id = $2) < $13 \
                   RETURNING *";
        let id = ids::new_id(ids::ENDPOINT);
        let types = serde_json::to_string(&new.event_types).unwrap_or_else(|_| "[]".into());
        let sealed = self.secrets_key()?.seal(&id, &new.secret);
        let postgres = matches!(self.pool, Pool::Postgres(_));
        let ep = on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            if postgres {
                sqlx::query(lock)
                    .bind(&new.account_id)
                    .execute(&mut *tx)
                    .await?;
            }
            let ep = sqlx::query_as::<_, Endpoint>(sql)
                .bind(&id)
                .bind(&new.account_id)
                .bind(&new.url)
                .bind(&new.description)
                .bind(&types)
                .bind(&sealed)
                .bind(new.rate_limit_per_sec)
                .bind(new.max_in_flight)
                .bind(now.millis())
                .bind(receiver_host(&new.url))
                .bind(&new.retry_strategy)
                .bind(&new.retry_statuses)
                .bind(most)
                .fetch_optional(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(ep)
        })?;
        ep.map(|ep| self.opened(ep)).transpose()
    }

    /// An endpoint of this account; another account's id is simply not found.
    pub async fn endpoint(&self, account_id: &str, id: &str) -> Result<Endpoint> {
        let sql = "SELECT * FROM endpoints WHERE account_id = $1 AND id = $2";
        let ep = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
    }

    pub async fn list_endpoints(&self, account_id: &str) -> Result<Vec<Endpoint>> {
        let sql = "SELECT * FROM endpoints WHERE account_id = $1 ORDER BY created_at, id";
        let eps = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(account_id)
            .fetch_all(p)
            .await)?;
        self.opened_all(eps)
    }

    pub async fn set_endpoint_state(
        &self,
        account_id: &str,
        id: &str,
        state: EndpointState,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<Endpoint> {
        let sql = "UPDATE endpoints SET state = $1, pause_reason = $2, updated_at = $3, \
                   paused_at = CASE WHEN $1 = 'paused' THEN COALESCE(paused_at, $3) END \
                   WHERE account_id = $4 AND id = $5 RETURNING *";
        let ep = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(state.as_str())
            .bind(reason)
            .bind(now.millis())
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
    }

    /// Changes only the fields the patch names, in one statement: two
    /// changes at once to different fields both stick (a read, then a
    /// write of every field, lost one of them).
    pub async fn update_endpoint(
        &self,
        account_id: &str,
        id: &str,
        patch: EndpointPatch,
        now: Timestamp,
    ) -> Result<Endpoint> {
        let sql = "UPDATE endpoints SET \
                     url = COALESCE($1, url), \
                     host = CASE WHEN $1 IS NULL THEN host ELSE $2 END, \
                     description = COALESCE($3, description), \
                     event_types = COALESCE($4, event_types), \
                     rate_limit_per_sec = CASE WHEN $5 THEN $6 ELSE rate_limit_per_sec END, \
                     max_in_flight = COALESCE($7, max_in_flight), \
                     retry_strategy = CASE WHEN $8 THEN $9 ELSE retry_strategy END, \
                     retry_statuses = CASE WHEN $10 THEN $11 ELSE retry_statuses END, \
                     updated_at = $12 \
                   WHERE account_id = $13 AND id = $14 RETURNING *";
        let host = patch.url.as_deref().and_then(receiver_host);
        let types = patch
            .event_types
            .map(|t| serde_json::to_string(&t).unwrap_or_else(|_| "[]".into()));
        let ep = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(&patch.url)
            .bind(&host)
            .bind(&patch.description)
            .bind(&types)
            .bind(patch.rate_limit_per_sec.is_some())
            .bind(patch.rate_limit_per_sec.flatten())
            .bind(patch.max_in_flight)
            .bind(patch.retry_strategy.is_some())
            .bind(patch.retry_strategy.clone().flatten())
            .bind(patch.retry_statuses.is_some())
            .bind(patch.retry_statuses.clone().flatten())
            .bind(now.millis())
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
    }

    /// Deletes the endpoint and its deliveries and attempts. The endpoint is
    /// disabled first, so nothing claims it meanwhile; then its attempts
    /// and deliveries go a small batch per statement, so on SQLite other
    /// writers get the lock between batches however many there are (one
    /// cascading statement held it for seconds at a million); the endpoint
    /// row goes last. Interrupted, it leaves a disabled endpoint that a
    /// second delete finishes.
    pub async fn delete_endpoint(&self, account_id: &str, id: &str) -> Result<()> {
        let disable = "UPDATE endpoints SET state = 'disabled' WHERE account_id = $1 AND id = $2";
        let found = on_writer!(self, |p| sqlx::query(disable)
            .bind(account_id)
            .bind(id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        if found == 0 {
            return Err(StoreError::NotFound);
        }
        self.purge_endpoint(id).await.map(|_| ())
    }

    /// Deletes a disabled endpoint's attempts, deliveries and row; returns
    /// (deliveries, attempts) deleted. On Postgres neither follows by
    /// cascade (migration 0022): deleting the row waits for any ingest
    /// that saw the endpoint (ingest key-share locks it), and a worker may
    /// record an attempt until its delivery is gone, so a last pass after
    /// the row takes what they wrote meanwhile.
    pub(super) async fn purge_endpoint(&self, id: &str) -> Result<(u64, u64)> {
        let attempts = "DELETE FROM attempts WHERE (delivery_id, attempt) IN \
                        (SELECT delivery_id, attempt FROM attempts WHERE endpoint_id = $1 LIMIT $2)";
        let deliveries = "DELETE FROM deliveries WHERE id IN \
                          (SELECT id FROM deliveries WHERE endpoint_id = $1 LIMIT $2)";
        let mut gone = (0, 0);
        gone.1 += self.delete_in_batches(attempts, id).await?;
        gone.0 += self.delete_in_batches(deliveries, id).await?;
        let sql = "DELETE FROM endpoints WHERE id = $1";
        on_writer!(self, |p| sqlx::query(sql)
            .bind(id)
            .execute(p)
            .await
            .map(|_| ()))?;
        gone.0 += self.delete_in_batches(deliveries, id).await?;
        gone.1 += self.delete_in_batches(attempts, id).await?;
        Ok(gone)
    }

    /// Runs `sql` (binding `id` and a batch size) until it deletes nothing;
    /// returns how many rows went.
    pub(super) async fn delete_in_batches(&self, sql: &str, id: &str) -> Result<u64> {
        let mut total = 0;
        loop {
            let n = on_writer!(self, |p| sqlx::query(sql)
                .bind(id)
                .bind(super::DELETE_BATCH)
                .execute(p)
                .await
                .map(|r| r.rows_affected()))?;
            if n == 0 {
                return Ok(total);
            }
            total += n;
        }
    }

    /// Resuming also closes the circuit and clears the streaks: the customer
    /// says the receiver is fixed, so its queue drains at once.
    pub async fn resume_endpoint(
        &self,
        account_id: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<Endpoint> {
        let sql =
            "UPDATE endpoints SET state = 'active', pause_reason = NULL, failure_streak = 0, \
                   transient_streak = 0, circuit_state = 'closed', circuit_open_until = NULL, \
                   circuit_cooldown_ms = 0, updated_at = $1, paused_at = NULL \
                   WHERE account_id = $2 AND id = $3 AND state <> 'disabled' RETURNING *";
        let ep = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(now.millis())
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
    }

    /// What waits for a paused endpoint: its pending deliveries, and how
    /// many expired with `reason` since `since` (the pause), in one read.
    pub async fn paused_backlog(
        &self,
        id: &str,
        reason: &str,
        since: Timestamp,
    ) -> Result<(i64, i64)> {
        let sql = "SELECT (SELECT count(*) FROM deliveries \
                             WHERE endpoint_id = $1 AND state = 'pending'), \
                          (SELECT count(*) FROM deliveries WHERE endpoint_id = $1 \
                             AND state = 'expired' AND finished_at >= $2 AND last_error = $3)";
        Ok(on_pool!(self, |p| sqlx::query_as(sql)
            .bind(id)
            .bind(since.millis())
            .bind(reason)
            .fetch_one(p)
            .await)?)
    }

    /// The old secret keeps signing beside the new one until `old_valid_until`.
    pub async fn rotate_secret(
        &self,
        account_id: &str,
        id: &str,
        new_secret: &str,
        old_valid_until: Timestamp,
        now: Timestamp,
    ) -> Result<Endpoint> {
        let sql =
            "UPDATE endpoints SET previous_secret = secret, previous_secret_expires_at = $1, \
                   secret = $2, updated_at = $3 WHERE account_id = $4 AND id = $5 RETURNING *";
        let sealed = self.secrets_key()?.seal(id, new_secret);
        let ep = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(old_valid_until.millis())
            .bind(&sealed)
            .bind(now.millis())
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
    }

    /// For the engine, which works across accounts.
    pub async fn endpoint_by_id(&self, id: &str) -> Result<Endpoint> {
        let sql = "SELECT * FROM endpoints WHERE id = $1";
        let ep = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(id)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
    }

    /// A 2xx: streaks reset, circuit closed, failing-since cleared, one
    /// success towards the in-flight cap's growth.
    pub async fn endpoint_succeeded(&self, id: &str, now: Timestamp) -> Result<()> {
        on_writer!(self, |p| sqlx::query(ENDPOINT_SUCCEEDED.as_str())
            .bind(now.millis())
            .bind(id)
            .bind(1i64)
            .bind(now.millis())
            .execute(p)
            .await
            .map(|_| ()))?;
        Ok(())
    }

    /// A fault of ours kept one of the endpoint's deliveries from being sent:
    /// `what`, kept for the endpoint page. Returns how many in a row now.
    pub async fn record_endpoint_fault(&self, id: &str, what: &str, now: Timestamp) -> Result<i64> {
        let sql = "UPDATE endpoints SET fault = $1, fault_at = COALESCE(fault_at, $2), \
                   fault_streak = fault_streak + 1 WHERE id = $3 RETURNING fault_streak";
        Ok(on_writer!(self, |p| sqlx::query_scalar(sql)
            .bind(what)
            .bind(now.millis())
            .bind(id)
            .fetch_optional(p)
            .await)?
        .unwrap_or(0))
    }

    /// A failed attempt, as `failure` says. Returns the endpoint as it now is.
    pub async fn endpoint_failed(
        &self,
        id: &str,
        failure: EndpointFailure,
        now: Timestamp,
    ) -> Result<Endpoint> {
        // A cut counts only for an attempt started after the last cut: the
        // answers of attempts already in flight then say nothing new.
        static SQL: LazyLock<String> = LazyLock::new(|| {
            let cap = "CASE WHEN adaptive_cap IS NOT NULL AND adaptive_cap < max_in_flight \
                       THEN adaptive_cap ELSE max_in_flight END";
            let cut = "$5 AND (cap_cut_at IS NULL OR cap_cut_at < $6)";
            format!(
                "UPDATE endpoints SET \
                 transient_streak = CASE WHEN $1 THEN transient_streak + 1 ELSE transient_streak END, \
                 failure_streak = CASE WHEN $2 THEN failure_streak + 1 ELSE failure_streak END, \
                 failing_since = COALESCE(failing_since, $3), updated_at = $3, \
                 fault = NULL, fault_at = NULL, fault_streak = 0, \
                 adaptive_cap = CASE WHEN {cut} THEN \
                   CASE WHEN {cap} < 2 THEN 1 ELSE ({cap}) / 2 END ELSE adaptive_cap END, \
                 cap_cut_at = CASE WHEN {cut} THEN $3 ELSE cap_cut_at END, \
                 success_run = CASE WHEN $5 THEN 0 ELSE success_run END, \
                 throttle_streak = CASE WHEN $7 AND (throttled_until IS NULL OR throttled_until <= $6) \
                   THEN throttle_streak + 1 ELSE throttle_streak END \
                 WHERE id = $4 RETURNING *"
            )
        });
        let ep = on_writer!(self, |p| sqlx::query_as::<_, Endpoint>(&SQL)
            .bind(failure.transient)
            .bind(failure.permanent)
            .bind(now.millis())
            .bind(id)
            .bind(failure.slow_down)
            .bind(failure.started.millis())
            .bind(failure.throttled)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
    }

    /// Holds the endpoint's work until `until` (a 429/503), unless a later
    /// throttle already does. Returns whether this one took hold.
    pub async fn throttle_endpoint(
        &self,
        id: &str,
        until: Timestamp,
        status: i64,
        now: Timestamp,
    ) -> Result<bool> {
        let sql = "UPDATE endpoints SET throttled_until = $1, throttled_at = $2, \
                   throttle_status = $3, updated_at = $2 \
                   WHERE id = $4 AND (throttled_until IS NULL OR throttled_until < $1)";
        let n = on_writer!(self, |p| sqlx::query(sql)
            .bind(until.millis())
            .bind(now.millis())
            .bind(status)
            .bind(id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    pub async fn open_circuit(
        &self,
        id: &str,
        until: Timestamp,
        cooldown_ms: i64,
        now: Timestamp,
    ) -> Result<()> {
        let sql = "UPDATE endpoints SET circuit_state = 'open', circuit_open_until = $1, \
                   circuit_cooldown_ms = $2, updated_at = $3 WHERE id = $4";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(until.millis())
            .bind(cooldown_ms)
            .bind(now.millis())
            .bind(id)
            .execute(p)
            .await
            .map(|_| ()))?;
        Ok(())
    }

    /// Moves an open circuit whose cooldown has passed to half-open. Only one
    /// caller wins, and the winner sends the single trial delivery.
    pub async fn try_half_open(&self, id: &str, now: Timestamp) -> Result<bool> {
        let sql = "UPDATE endpoints SET circuit_state = 'half_open', updated_at = $1 \
                   WHERE id = $2 AND circuit_state = 'open' AND circuit_open_until <= $1";
        let n = on_writer!(self, |p| sqlx::query(sql)
            .bind(now.millis())
            .bind(id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Pauses an endpoint the engine found dead; `false` if it was not active.
    pub async fn pause_dead_endpoint(
        &self,
        id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<bool> {
        let sql = "UPDATE endpoints SET state = 'paused', pause_reason = $1, updated_at = $2, \
                   paused_at = COALESCE(paused_at, $2) \
                   WHERE id = $3 AND state = 'active'";
        let n = on_writer!(self, |p| sqlx::query(sql)
            .bind(reason)
            .bind(now.millis())
            .bind(id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }
}
