//! Endpoints: creating and reading them, edits, pause/resume, secret rotation, and the health
//! bookkeeping (failure streaks, circuit breaker) the engine updates.

use super::{sql::ENDPOINT_SUCCEEDED, Endpoint, EndpointState, Pool, Result, Store, StoreError};
use crate::{clock::Timestamp, ids};

pub struct NewEndpoint {
    pub account_id: String,
    pub url: String,
    pub description: String,
    pub event_types: Vec<String>,
    pub secret: String,
    pub rate_limit_per_sec: Option<i64>,
    pub max_in_flight: i64,
}

/// Fields a PATCH may change; `None` leaves the column as it is.
#[derive(Debug, Default)]
pub struct EndpointPatch {
    pub url: Option<String>,
    pub description: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub rate_limit_per_sec: Option<Option<i64>>,
    pub max_in_flight: Option<i64>,
}

impl Store {
    pub async fn create_endpoint(&self, new: NewEndpoint, now: Timestamp) -> Result<Endpoint> {
        let sql = "INSERT INTO endpoints (id, account_id, url, description, event_types, secret, \
                   rate_limit_per_sec, max_in_flight, created_at, updated_at) \
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING *";
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
            .fetch_one(p)
            .await)?;
        self.opened(ep)
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
        let sql = "UPDATE endpoints SET state = $1, pause_reason = $2, updated_at = $3 \
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

    pub async fn update_endpoint(
        &self,
        account_id: &str,
        id: &str,
        patch: EndpointPatch,
        now: Timestamp,
    ) -> Result<Endpoint> {
        let current = self.endpoint(account_id, id).await?;
        let types = match patch.event_types {
            Some(t) => serde_json::to_string(&t).unwrap_or_else(|_| "[]".into()),
            None => current.event_types,
        };
        let sql = "UPDATE endpoints SET url = $1, description = $2, event_types = $3, \
                   rate_limit_per_sec = $4, max_in_flight = $5, updated_at = $6 \
                   WHERE account_id = $7 AND id = $8 RETURNING *";
        let ep = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(patch.url.unwrap_or(current.url))
            .bind(patch.description.unwrap_or(current.description))
            .bind(&types)
            .bind(
                patch
                    .rate_limit_per_sec
                    .unwrap_or(current.rate_limit_per_sec)
            )
            .bind(patch.max_in_flight.unwrap_or(current.max_in_flight))
            .bind(now.millis())
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
    }

    /// Deletes the endpoint and, through the foreign keys, its deliveries.
    pub async fn delete_endpoint(&self, account_id: &str, id: &str) -> Result<()> {
        let sql = "DELETE FROM endpoints WHERE account_id = $1 AND id = $2";
        let n = on_pool!(self, |p| sqlx::query(sql)
            .bind(account_id)
            .bind(id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        if n == 0 {
            Err(StoreError::NotFound)
        } else {
            Ok(())
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
                   circuit_cooldown_ms = 0, updated_at = $1 \
                   WHERE account_id = $2 AND id = $3 AND state <> 'disabled' RETURNING *";
        let ep = on_pool!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(now.millis())
            .bind(account_id)
            .bind(id)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
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

    /// A 2xx: streaks reset, circuit closed, failing-since cleared.
    pub async fn endpoint_succeeded(&self, id: &str, now: Timestamp) -> Result<()> {
        on_writer!(self, |p| sqlx::query(ENDPOINT_SUCCEEDED)
            .bind(now.millis())
            .bind(id)
            .execute(p)
            .await
            .map(|_| ()))?;
        Ok(())
    }

    /// A failed attempt. `transient` grows the circuit breaker's streak,
    /// `permanent` the dead-endpoint streak. Returns the endpoint as it now is.
    pub async fn endpoint_failed(
        &self,
        id: &str,
        transient: bool,
        permanent: bool,
        now: Timestamp,
    ) -> Result<Endpoint> {
        let sql = "UPDATE endpoints SET \
                   transient_streak = CASE WHEN $1 THEN transient_streak + 1 ELSE transient_streak END, \
                   failure_streak = CASE WHEN $2 THEN failure_streak + 1 ELSE failure_streak END, \
                   failing_since = COALESCE(failing_since, $3), updated_at = $3 \
                   WHERE id = $4 RETURNING *";
        let ep = on_writer!(self, |p| sqlx::query_as::<_, Endpoint>(sql)
            .bind(transient)
            .bind(permanent)
            .bind(now.millis())
            .bind(id)
            .fetch_one(p)
            .await)?;
        self.opened(ep)
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
        let sql = "UPDATE endpoints SET state = 'paused', pause_reason = $1, updated_at = $2 \
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
