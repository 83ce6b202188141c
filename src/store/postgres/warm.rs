//! The delivery path's connections, the most recently used first.
//!
//! sqlx's pool hands out the connection that has been idle the longest,
//! and checks each one with a round trip to the server as it comes back.
//! The delivery path (ingest, claims, results, the announcements of work
//! to other nodes) is one statement a call, so every statement paid a
//! round trip more, and at light load each went to the backend that had
//! waited the longest, the one whose caches (its plans, the CPU's) were
//! the coldest: in pgbench, paced at 70 calls a second, an ingest lease
//! took 1.00–1.27 ms on one connection and 1.29–1.60 ms on ten taken in
//! turn, a ten-result call 1.09–1.27 against 1.42–1.95
//! (`bench/results/2026-12-07-postgres-connections-in-turn-pgbench.txt`).
//! Here a connection whose statement answered goes back on a short stack
//! and the next call takes the top one. One whose statement failed or was
//! dropped part-way goes back to the pool, whose check finds out whether
//! it can still be used; so does one idle for a while (the pool checks a
//! connection idle that long before it hands it out), and none is kept
//! while the pool has no connection to spare.

use std::{
    ops::{Deref, DerefMut},
    sync::{Arc, Mutex, Weak},
    time::{Duration, Instant},
};

use sqlx::{pool::PoolConnection, PgConnection, PgPool, Postgres};

/// A connection goes back to the pool after this long off it, so that the
/// pool's limit on a connection's lifetime still applies to it.
const BACK_TO_THE_POOL_AFTER: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct Warm {
    pool: PgPool,
    stack: Mutex<Stack>,
    keep: usize,
    idle_for: Duration,
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

impl Kept {
    fn fresh(&self, now: Instant, idle_for: Duration) -> bool {
        now.duration_since(self.since) < idle_for
            && now.duration_since(self.taken) < BACK_TO_THE_POOL_AFTER
    }
}

impl Warm {
    /// Keeps up to `keep` connections of `pool` off it (none when 0),
    /// each for as long as it is used again within `idle_for`; a task
    /// gives back those that were not.
    pub fn start(pool: PgPool, keep: usize, idle_for: Duration) -> Arc<Warm> {
        let warm = Arc::new(Warm {
            pool,
            stack: Mutex::new(Stack::default()),
            keep,
            idle_for,
        });
        if keep > 0 {
            tokio::spawn(give_back_the_idle(Arc::downgrade(&warm), idle_for));
        }
        warm
    }

    /// The connection that answered last, else one from the pool.
    pub async fn acquire(&self) -> Result<WarmConnection<'_>, sqlx::Error> {
        let mut idle = Vec::new();
        let top = {
            let mut stack = self.lock();
            let now = Instant::now();
            let mut top = None;
            while let Some(kept) = stack.kept.pop() {
                if kept.fresh(now, self.idle_for) {
                    top = Some(kept);
                    break;
                }
                idle.push(kept);
            }
            top
        };
        // Idle long enough to be checked: back to the pool, which checks it.
        drop(idle);
        let (conn, taken) = match top {
            Some(kept) => (kept.conn, kept.taken),
            None => (self.pool.acquire().await?, Instant::now()),
        };
        Ok(WarmConnection {
            conn: Some(conn),
            taken,
            suspect: false,
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

    /// Gives back to the pool every connection not used within `idle_for`.
    fn give_back_idle(&self) {
        let now = Instant::now();
        let idle: Vec<Kept> = {
            let mut stack = self.lock();
            let (fresh, idle) = std::mem::take(&mut stack.kept)
                .into_iter()
                .partition(|k| k.fresh(now, self.idle_for));
            stack.kept = fresh;
            idle
        };
        drop(idle);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Stack> {
        // The stack holds no invariant a panic elsewhere could break.
        self.stack.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // A pooled connection goes back through a task; with no runtime
        // left to run it (the process is ending), its socket just closes.
        if tokio::runtime::Handle::try_current().is_err() {
            for kept in self.kept.drain(..) {
                drop(kept.conn.leak());
            }
        }
    }
}

async fn give_back_the_idle(warm: Weak<Warm>, idle_for: Duration) {
    loop {
        tokio::time::sleep(idle_for).await;
        match warm.upgrade() {
            Some(w) if !w.lock().closed => w.give_back_idle(),
            _ => return,
        }
    }
}

/// A connection of `Warm`'s. Dropped without `answered`, it goes back to
/// the pool.
#[derive(Debug)]
pub struct WarmConnection<'a> {
    conn: Option<PoolConnection<Postgres>>,
    taken: Instant,
    suspect: bool,
    home: &'a Warm,
}

impl WarmConnection<'_> {
    /// A statement on it failed and the caller went on: `answered` gives
    /// it back to the pool, whose check finds out whether it still works.
    pub fn suspect(&mut self) {
        self.suspect = true;
    }

    /// Its last statement answered in full, so the connection is ready
    /// for the next call: back on the stack, if there is room and the
    /// pool has a connection to spare for everyone else.
    pub fn answered(mut self) {
        let Some(conn) = self.conn.take() else { return };
        let now = Instant::now();
        let this = Kept {
            conn,
            since: now,
            taken: self.taken,
        };
        let home = self.home;
        let pool_has_room = home.pool.num_idle() > 0
            || home.pool.size() < home.pool.options().get_max_connections();
        let mut stack = home.lock();
        if !self.suspect
            && !stack.closed
            && stack.kept.len() < home.keep
            && pool_has_room
            && this.fresh(now, home.idle_for)
        {
            stack.kept.push(this);
            return;
        }
        drop(stack);
        // Back to the pool, outside the lock.
        drop(this);
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
