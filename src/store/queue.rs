//! The queue: everything a delivery goes through. Entering it (a group of
//! ingested events and their deliveries), claiming, the batch's inputs,
//! the attempt's result written with the delivery's next state (group
//! commit), and the other exits of a claim (released, postponed, expired,
//! rescued after a lost lease), plus the "work is due" announcements
//! between nodes.

use std::{collections::HashMap, sync::LazyLock};

use super::{
    claim_rules::ClaimRules,
    completion::{AttemptRecord, Completion, Transition},
    error::retry_moved,
    ingest::{LeaseTerms, NewIngest},
    postgres,
    sql::{placeholders, UNCLAIMED},
    sqlite, Claim, Delivery, DeliveryState, Endpoint, Event, InsertedEvent, Pool, ReadAlong,
    Result, Store, StoreError,
};
use crate::clock::Timestamp;

#[derive(Debug, Default)]
pub struct BatchInputs {
    pub endpoints: HashMap<String, Endpoint>,
    /// By delivery id.
    pub events: HashMap<String, Event>,
    /// Endpoints that could not be read or opened (a stored secret the
    /// key does not open, a malformed row), with why: a fault of ours that
    /// holds only their own deliveries, never the rest of the batch.
    pub broken_endpoints: HashMap<String, String>,
    /// Deliveries whose event could not be read, with why.
    pub broken_events: HashMap<String, String>,
}

/// A claim's deliveries as they came due, the oldest first.
fn in_due_order(deliveries: &mut [Delivery]) {
    deliveries.sort_by(|a, b| (a.next_attempt_at, &a.id).cmp(&(b.next_attempt_at, &b.id)));
}

impl Store {
    /// Stores every event of `batch` with one `pending` delivery per
    /// subscribed endpoint (paused ones too: skipping them would lose
    /// data; disabled ones not), all in one transaction. Each answers for
    /// itself: a producer id seen before, or earlier in the batch, is a
    /// `Conflict` and leaves nothing behind. An `Err` of the whole call
    /// means nothing of the batch was written.
    pub async fn insert_events(&self, batch: &[NewIngest]) -> Result<Vec<Result<InsertedEvent>>> {
        Ok(self.insert_events_leasing(batch, None).await?.0)
    }

    /// `insert_events`, and in the same transaction a claim of the due
    /// deliveries `lease` allows (`LeaseTerms`): the claim's rules hold
    /// as in `claim`. Each delivery of the batch it leased is in flight
    /// in the answers, and each answer says whether the lease left
    /// anything due that could start now.
    pub async fn insert_events_leasing(
        &self,
        batch: &[NewIngest],
        lease: Option<LeaseTerms>,
    ) -> Result<(Vec<Result<InsertedEvent>>, Claim)> {
        if batch.is_empty() {
            return Ok((Vec::new(), Claim::default()));
        }
        // Due as of the latest of the group's own times: a wall clock
        // stepped back since would hide them from the lease, which would
        // then say it left nothing due. The lease keeps its length.
        let newest = batch.iter().map(|n| n.now).max();
        let lease = lease.map(|terms| {
            let now = newest.map_or(terms.now, |n| n.max(terms.now));
            LeaseTerms {
                now,
                lease_until: Timestamp(terms.lease_until.0 + (now.0 - terms.now.0)),
                ..terms
            }
        });
        let token = lease.map(|_| self.claim_token()).unwrap_or_default();
        let (mut inserted, mut claim) = match &self.pool {
            Pool::Postgres(_) => {
                let lease = lease.map(|terms| (terms, token.as_str()));
                postgres::insert_events(self.pg_warm()?, &self.fan_outs, batch, lease).await?
            }
            Pool::Sqlite(_) => {
                sqlite::insert_events(&self.sqlite_writer()?.conn, batch, lease, &token).await?
            }
        };
        in_due_order(&mut claim.deliveries);
        super::ingest::leased_in_group(&mut inserted, &mut claim);
        Ok((inserted, claim))
    }

    /// Takes up to `limit` due deliveries, within each endpoint's free
    /// in-flight slots (its adaptive cap under `max_in_flight`, one for a
    /// half-open circuit), its rate budget and its host's cap (`rules`),
    /// skipping throttled endpoints, the longest-waiting endpoint first,
    /// and leases them until `lease_until`. No two claimers ever receive
    /// the same row, and the limits hold across every node.
    pub async fn claim_due(
        &self,
        now: Timestamp,
        lease_until: Timestamp,
        limit: i64,
        rules: ClaimRules,
    ) -> Result<Vec<Delivery>> {
        Ok(self.claim(now, lease_until, limit, rules).await?.deliveries)
    }

    /// `claim_due`, saying also whether the claim held work back.
    pub async fn claim(
        &self,
        now: Timestamp,
        lease_until: Timestamp,
        limit: i64,
        rules: ClaimRules,
    ) -> Result<Claim> {
        let token = self.claim_token();
        let mut claim = match &self.pool {
            Pool::Sqlite(reader) => {
                let writer = self.sqlite_writer()?;
                // One claim at a time in the writer's queue. With a claim
                // queued per loop, claims took most of the writer's turns
                // under load, each leasing the few rows that came due since
                // the last and paying a claim's fixed cost (its slot count,
                // its commit) again; one at a time, a claim leases what
                // came due while it waited.
                let _turn = writer.claim_turn.lock().await;
                let conn = &writer.conn;
                sqlite::claim_due(reader, conn, now, lease_until, limit, rules, &token).await?
            }
            Pool::Postgres(_) => {
                let warm = self.pg_warm()?;
                retry_moved(|| postgres::claim_due(warm, now, lease_until, limit, rules, &token))
                    .await?
            }
        };
        in_due_order(&mut claim.deliveries);
        Ok(claim)
    }

    /// Writes the attempt and moves the delivery on, atomically, provided the
    /// caller still holds the claim it was given.
    pub async fn complete_attempt(
        &self,
        claimed: &Delivery,
        record: &AttemptRecord,
        transition: Transition,
        now: Timestamp,
    ) -> Result<Delivery> {
        let one = Completion {
            claimed: claimed.clone(),
            record: record.clone(),
            transition,
            now,
        };
        let mut answers = self.complete_attempts(std::slice::from_ref(&one)).await?;
        answers
            .pop()
            .unwrap_or_else(|| Err(StoreError::LostClaim(claimed.id.clone())))
    }

    /// Writes many attempts in one transaction (group commit; one commit
    /// per batch is most of what makes the engine fast). Each is written
    /// only if its claim is still held and answers for itself; an endpoint
    /// that delivered is marked healthy once, as of its latest success.
    pub async fn complete_attempts(&self, batch: &[Completion]) -> Result<Vec<Result<Delivery>>> {
        match &self.pool {
            Pool::Sqlite(_) => sqlite::complete_attempts(&self.sqlite_writer()?.conn, batch).await,
            Pool::Postgres(_) => {
                let warm = self.pg_warm()?;
                retry_moved(|| postgres::complete_attempts(warm, batch)).await
            }
        }
    }

    /// Puts a claimed delivery back as it was before the claim: no attempt
    /// counted, schedule unchanged. For faults of the worker, not the receiver.
    pub async fn release_claim(&self, claimed: &Delivery, now: Timestamp) -> Result<()> {
        self.hand_back(claimed, HandBack::Release, now).await
    }

    /// Whether workers of other processes share this queue, so that work
    /// must be announced to them (Postgres); on SQLite every worker lives
    /// in this process.
    pub fn has_other_nodes(&self) -> bool {
        matches!(self.pool, Pool::Postgres(_))
    }

    /// Tells the workers of every node that work is due now. Within one
    /// process the engine wakes its own workers; Postgres carries it further.
    pub async fn announce_work(&self) -> Result<()> {
        self.announce_work_from("").await
    }

    /// Like `announce_work`, naming the node that announces, so its own
    /// listener can let it pass (its workers were woken directly).
    pub async fn announce_work_from(&self, origin: &str) -> Result<()> {
        match &self.pool {
            Pool::Sqlite(_) => Ok(()),
            Pool::Postgres(_) => {
                postgres::announce_work(self.pg_warm()?, self.pg_schema.as_deref(), origin).await
            }
        }
    }

    /// A stream of "work is due" announcements from every node; `None` on
    /// SQLite, where all workers live in this process.
    pub async fn listen_for_work(&self) -> Result<Option<sqlx::postgres::PgListener>> {
        let Pool::Postgres(p) = &self.pool else {
            return Ok(None);
        };
        let mut listener = sqlx::postgres::PgListener::connect_with(p).await?;
        listener
            .listen(&postgres::work_channel(self.pg_schema.as_deref()))
            .await?;
        Ok(Some(listener))
    }

    /// Returns `in_flight` rows whose lease has run out (a crashed or stuck
    /// worker) to `pending`, without counting an attempt. Returns how many.
    pub async fn rescue_expired_leases(&self, now: Timestamp) -> Result<u64> {
        let sql = format!(
            "UPDATE deliveries SET state = 'pending', {UNCLAIMED}, updated_at = $1 \
             WHERE state = 'in_flight' AND lease_until <= $1"
        );
        retry_moved(|| async {
            on_writer!(self, |p| sqlx::query(&sql)
                .bind(now.millis())
                .execute(p)
                .await
                .map(|r| r.rows_affected()))
        })
        .await
    }

    /// Expires the pending deliveries of endpoints no claim takes (paused,
    /// disabled) whose retry window has passed, for `reason`: the deadline
    /// holds whatever the endpoint's state. (Claims expire an active
    /// endpoint's overdue work as they reach it.) Returns how many.
    pub async fn expire_held_overdue(&self, reason: &str, now: Timestamp) -> Result<u64> {
        let sql = "UPDATE deliveries SET state = 'expired', last_error = $1, finished_at = $2, \
                   updated_at = $2 \
                   WHERE id IN (SELECT d.id FROM endpoints e \
                     JOIN deliveries d ON d.endpoint_id = e.id \
                     WHERE e.state <> 'active' AND d.state = 'pending' AND d.give_up_at <= $2 \
                     LIMIT $3) AND state = 'pending'";
        in_batches(|batch| async move {
            Ok(on_writer!(self, |p| sqlx::query(sql)
                .bind(reason)
                .bind(now.millis())
                .bind(batch)
                .execute(p)
                .await
                .map(|r| r.rows_affected()))?)
        })
        .await
    }

    /// Ends every pending delivery of a paused endpoint, as expired for
    /// `reason`: the customer discarded its queue. Returns how many.
    pub async fn discard_pending(
        &self,
        endpoint_id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<u64> {
        let sql = "UPDATE deliveries SET state = 'expired', last_error = $1, finished_at = $2, \
                   updated_at = $2 \
                   WHERE id IN (SELECT d.id FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id \
                     WHERE d.endpoint_id = $3 AND d.state = 'pending' AND e.state = 'paused' \
                     LIMIT $4) AND state = 'pending'";
        in_batches(|batch| async move {
            Ok(on_writer!(self, |p| sqlx::query(sql)
                .bind(reason)
                .bind(now.millis())
                .bind(endpoint_id)
                .bind(batch)
                .execute(p)
                .await
                .map(|r| r.rows_affected()))?)
        })
        .await
    }

    /// How many deliveries wait for the endpoint.
    pub async fn pending_of_endpoint(&self, endpoint_id: &str) -> Result<i64> {
        let sql = "SELECT count(*) FROM deliveries WHERE endpoint_id = $1 AND state = 'pending'";
        Ok(on_pool!(self, |p| sqlx::query_scalar(sql)
            .bind(endpoint_id)
            .fetch_one(p)
            .await)?)
    }

    /// Ends a claimed delivery without an attempt (its deadline passed while
    /// it waited), recording why.
    pub async fn expire_claimed(
        &self,
        claimed: &Delivery,
        reason: &str,
        now: Timestamp,
    ) -> Result<()> {
        self.hand_back(claimed, HandBack::Expire(reason), now).await
    }

    /// Hands a claimed delivery back for later without counting an attempt
    /// (rate limit, half-open circuit busy).
    pub async fn postpone_claim(
        &self,
        claimed: &Delivery,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<()> {
        self.hand_back(claimed, HandBack::Postpone(until), now)
            .await
    }

    /// Every exit of a claim without an attempt, in one statement guarded by
    /// the claim token.
    async fn hand_back(&self, claimed: &Delivery, to: HandBack<'_>, now: Timestamp) -> Result<()> {
        static SQL: LazyLock<String> = LazyLock::new(|| {
            format!(
                "UPDATE deliveries SET state = $1, next_attempt_at = COALESCE($2, next_attempt_at), \
                   last_error = COALESCE($3, last_error), finished_at = COALESCE($4, finished_at), \
                   {UNCLAIMED}, updated_at = $5 \
                 WHERE id = $6 AND state = 'in_flight' AND claim_token = $7"
            )
        });
        let (state, next_at, error, finished_at) = match to {
            HandBack::Release => (DeliveryState::Pending, None, None, None),
            HandBack::Postpone(until) => (DeliveryState::Pending, Some(until.millis()), None, None),
            HandBack::Expire(reason) => (
                DeliveryState::Expired,
                None,
                Some(reason),
                Some(now.millis()),
            ),
        };
        let n = retry_moved(|| async {
            on_writer!(self, |p| sqlx::query(&SQL)
                .bind(state.as_str())
                .bind(next_at)
                .bind(error)
                .bind(finished_at)
                .bind(now.millis())
                .bind(&claimed.id)
                .bind(&claimed.claim_token)
                .execute(p)
                .await
                .map(|r| r.rows_affected()))
        })
        .await?;
        claim_held(n, claimed)
    }

    /// What a claimed batch's attempts need: what its claim read along,
    /// and the rest read here.
    pub async fn batch_inputs(
        &self,
        claimed: &[Delivery],
        read_along: ReadAlong,
    ) -> Result<BatchInputs> {
        if claimed.is_empty() {
            return Ok(BatchInputs::default());
        }
        let ReadAlong {
            events: mut found_events,
            endpoints,
        } = read_along;
        let mut found_endpoints: HashMap<String, std::result::Result<Endpoint, String>> =
            endpoints.into_iter().map(|(id, ep)| (id, Ok(ep))).collect();
        let mut endpoint_ids: Vec<&str> = claimed
            .iter()
            .map(|d| d.endpoint_id.as_str())
            .filter(|id| !found_endpoints.contains_key(*id))
            .collect();
        endpoint_ids.sort_unstable();
        endpoint_ids.dedup();
        let batch: Vec<&Delivery> = claimed
            .iter()
            .filter(|d| !found_events.contains_key(&d.id))
            .collect();
        let mut inputs = BatchInputs::default();
        // One query each, side by side: what the claim did not read along
        // (on SQLite all of a claim's; of a lease's, the events of older
        // deliveries the group did not make) is on the way of the first
        // attempt, and neither needs the other. If a row will
        // not decode, one query per id, so that row alone is broken.
        let (all_endpoints, all_events) = tokio::join!(
            self.endpoints_by_id(&endpoint_ids),
            self.events_of_deliveries(&batch)
        );
        match all_endpoints {
            Ok(all) => found_endpoints.extend(all.into_iter().map(|ep| (ep.id.clone(), Ok(ep)))),
            Err(StoreError::Database(e)) if is_decode(&e) => {
                for id in &endpoint_ids {
                    match self.endpoints_by_id(&[id]).await {
                        Ok(found) => found_endpoints
                            .extend(found.into_iter().map(|ep| (ep.id.clone(), Ok(ep)))),
                        Err(e) => {
                            found_endpoints.insert(id.to_string(), Err(e.to_string()));
                        }
                    }
                }
            }
            Err(e) => return Err(e),
        }
        for (id, ep) in found_endpoints {
            match ep.and_then(|ep| self.opened_to_sign(ep).map_err(|e| e.to_string())) {
                Ok(ep) => {
                    inputs.endpoints.insert(id, ep);
                }
                Err(why) => {
                    inputs.broken_endpoints.insert(id, why);
                }
            }
        }
        match all_events {
            Ok(all) => found_events.extend(all),
            Err(StoreError::Database(e)) if is_decode(&e) => {
                for d in &batch {
                    match self.events_of_deliveries(&[d]).await {
                        Ok(found) => found_events.extend(found),
                        Err(e) => {
                            inputs.broken_events.insert(d.id.clone(), e.to_string());
                        }
                    }
                }
            }
            Err(e) => return Err(e),
        }
        inputs.events = found_events;
        Ok(inputs)
    }

    /// The endpoints of these ids as stored (secrets still sealed).
    async fn endpoints_by_id(&self, ids: &[&str]) -> Result<Vec<Endpoint>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT * FROM endpoints WHERE id IN ({})",
            placeholders(1, ids.len())
        );
        Ok(on_pool!(self, |p| {
            let mut q = sqlx::query_as::<_, Endpoint>(&sql);
            for id in ids {
                q = q.bind(*id);
            }
            q.fetch_all(p).await
        })?)
    }

    /// Each of these deliveries' event, by delivery id.
    async fn events_of_deliveries(&self, claimed: &[&Delivery]) -> Result<Vec<(String, Event)>> {
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        let rows = match &self.pool {
            // The keys travel as arrays: one plan whatever the batch's
            // size, and no read of the (partitioned) deliveries, whose
            // three id probes per row made this a fifth of Postgres's time
            // per delivery in the burn-down.
            Pool::Postgres(p) => {
                let sql =
                    "SELECT k.delivery_id, e.* FROM unnest($1::text[], $2::text[], $3::text[]) \
                             AS k(delivery_id, account_id, event_id) \
                           JOIN events e ON e.account_id = k.account_id AND e.id = k.event_id";
                sqlx::query_as::<_, WithDelivery>(sql)
                    .bind(claimed.iter().map(|d| d.id.as_str()).collect::<Vec<_>>())
                    .bind(
                        claimed
                            .iter()
                            .map(|d| d.account_id.as_str())
                            .collect::<Vec<_>>(),
                    )
                    .bind(
                        claimed
                            .iter()
                            .map(|d| d.event_id.as_str())
                            .collect::<Vec<_>>(),
                    )
                    .fetch_all(p)
                    .await?
            }
            Pool::Sqlite(p) => {
                let sql = format!(
                    "SELECT d.id AS delivery_id, e.* FROM deliveries d \
                     JOIN events e ON e.account_id = d.account_id AND e.id = d.event_id \
                     WHERE d.id IN ({})",
                    sqlite::marks(claimed.len())
                );
                let mut q = sqlx::query_as::<_, WithDelivery>(&sql);
                for d in claimed {
                    q = q.bind(d.id.as_str());
                }
                q.fetch_all(p).await?
            }
        };
        Ok(rows.into_iter().map(|w| (w.delivery_id, w.event)).collect())
    }
}

/// A row that would not decode into its type: that row is broken, not the
/// database.
fn is_decode(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_))
}

/// Rows per statement for a change that may reach a whole queue, so the
/// SQLite writer is never held for long.
const BATCH: i64 = 500;

/// Runs `step` (given the batch size; returns the rows it changed) until
/// a batch comes back short; returns the total.
async fn in_batches<F, Fut>(mut step: F) -> Result<u64>
where
    F: FnMut(i64) -> Fut,
    Fut: std::future::Future<Output = Result<u64>>,
{
    let mut total = 0;
    loop {
        let n = step(BATCH).await?;
        total += n;
        if n < BATCH as u64 {
            return Ok(total);
        }
    }
}

/// Where a claim goes when it ends without an attempt.
enum HandBack<'a> {
    /// As before the claim: schedule unchanged (a fault of ours).
    Release,
    /// Pending again, due at this time.
    Postpone(Timestamp),
    /// Dead-lettered, for this reason.
    Expire(&'a str),
}

/// An update guarded by the claim token touched no row: the claim was lost
/// (rescued, or finished elsewhere).
fn claim_held(rows: u64, claimed: &Delivery) -> Result<()> {
    if rows == 1 {
        Ok(())
    } else {
        Err(StoreError::LostClaim(claimed.id.clone()))
    }
}

#[derive(sqlx::FromRow)]
struct WithDelivery {
    delivery_id: String,
    #[sqlx(flatten)]
    event: Event,
}
