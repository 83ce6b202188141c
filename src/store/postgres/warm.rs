//! The delivery path's connections, the most recently used first.
//!
//! sqlx's pool hands out the connection that has been idle the longest,
//! and checks each one with a round trip to the server as it comes back.
//! The delivery path (ingest, claims, results) is one statement a call,
//! so every statement paid a round trip more, and at light load each went
//! to the backend that had waited the longest, the one whose caches (its
//! plans, the CPU's) were the coldest: in pgbench a lease call paced at
//! 70 a second took 1.26–1.27 ms on one connection and 1.53–1.60 ms on
//! ten taken in turn, a ten-result call 1.09–1.15 against 1.69–1.95.
//! Here a connection whose statement answered goes back on a short stack
//! and the next call takes the top one. One whose statement failed or was
//! dropped part-way goes back to the pool, whose check finds out whether
//! it can still be used.

use std::{
    ops::{Deref, DerefMut},
    sync::Mutex,
    time::{Duration, Instant},
};

use sqlx::{pool::PoolConnection, Connection, PgConnection, PgPool, Postgres};

/// A connection goes back to the pool after this long off it, so that the
/// pool's own limits (a connection's lifetime, its idle timeout) still
/// apply to it.
const BACK_TO_THE_POOL_AFTER: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct Warm {
    pool: PgPool,
    idle: Mutex<Stack>,
    keep: usize,
    ping_after: Duration,
}

#[derive(Debug, Default)]
struct Stack {
    /// The top is the connection that answered last.
    kept: Vec<Kept>,
    /// Once the store closes, every connection goes back to the pool,
    /// whose `close` waits for them all.
    closed: bool,
}

#[derive(Debug)]
struct Kept {
    conn: PoolConnection<Postgres>,
    /// When its last statement answered.
    since: Instant,
    /// When it was taken from the pool.
    taken: Instant,
}

impl Warm {
    /// Keeps up to `keep` connections of `pool` off it; one idle for
    /// `ping_after` or longer is pinged before it is handed out, as the
    /// pool checks its own (`PING_IF_IDLE_FOR`).
    pub fn new(pool: PgPool, keep: usize, ping_after: Duration) -> Warm {
        Warm {
            pool,
            idle: Mutex::new(Stack::default()),
            keep,
            ping_after,
        }
    }

    /// The connection that answered last, else one from the pool.
    pub async fn acquire(&self) -> Result<WarmConnection<'_>, sqlx::Error> {
        loop {
            let top = self.lock().kept.pop();
            let Some(mut kept) = top else { break };
            if kept.taken.elapsed() >= BACK_TO_THE_POOL_AFTER {
                continue;
            }
            if kept.since.elapsed() >= self.ping_after && kept.conn.ping().await.is_err() {
                // Dead while it waited here (the server restarted, a
                // proxy cut it): closed, not given back.
                kept.conn.close_on_drop();
                continue;
            }
            return Ok(WarmConnection {
                conn: Some(kept.conn),
                taken: kept.taken,
                home: self,
            });
        }
        Ok(WarmConnection {
            conn: Some(self.pool.acquire().await?),
            taken: Instant::now(),
            home: self,
        })
    }

    /// How many connections wait on the stack.
    pub fn kept(&self) -> usize {
        self.lock().kept.len()
    }

    /// Gives every connection back to the pool, now and from now on.
    pub fn close(&self) {
        let kept = {
            let mut stack = self.lock();
            stack.closed = true;
            std::mem::take(&mut stack.kept)
        };
        drop(kept);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Stack> {
        // The stack holds no invariant a panic elsewhere could break.
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A connection of `Warm`'s. Dropped without `answered`, it goes back to
/// the pool.
#[derive(Debug)]
pub struct WarmConnection<'a> {
    conn: Option<PoolConnection<Postgres>>,
    taken: Instant,
    home: &'a Warm,
}

impl WarmConnection<'_> {
    /// Its last statement answered in full, so the connection is ready
    /// for the next call: back on the stack, if there is room.
    pub fn answered(mut self) {
        let Some(conn) = self.conn.take() else { return };
        let now = Instant::now();
        let this = Kept {
            conn,
            since: now,
            taken: self.taken,
        };
        let mut stale = Vec::new();
        {
            let mut stack = self.home.lock();
            let kept = &mut stack.kept;
            while kept
                .first()
                .is_some_and(|k| now.duration_since(k.taken) >= BACK_TO_THE_POOL_AFTER)
            {
                stale.push(kept.remove(0));
            }
            if !stack.closed
                && stack.kept.len() < self.home.keep
                && now.duration_since(this.taken) < BACK_TO_THE_POOL_AFTER
            {
                stack.kept.push(this);
            } else {
                stale.push(this);
            }
        }
        // Dropped outside the lock: each goes back to the pool.
        drop(stale);
    }
}

impl Deref for WarmConnection<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        self.conn.as_ref().expect("taken only by answered")
    }
}

impl DerefMut for WarmConnection<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.conn.as_mut().expect("taken only by answered")
    }
}
