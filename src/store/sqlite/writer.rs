//! SQLite's one connection for the delivery path's writes, held behind a
//! lock rather than in a pool, and transactions on it that cost no round
//! trip of their own where the caller can help it.
//!
//! Every command is a round trip to sqlx's SQLite thread, and at low load
//! each one wakes a sleeping thread (perf over the 10 % phase: three
//! quarters of those threads' time in the kernel's scheduler). A pooled
//! connection pings that thread every time it goes back to the pool, and
//! a transaction sqlx begins with `BEGIN IMMEDIATE` asks it once more
//! whether one began: with `BEGIN` and `COMMIT` that was four round trips
//! of bookkeeping a transaction. Here `BEGIN IMMEDIATE` goes out in the
//! same command as the transaction's first statement, and the caller may
//! send `COMMIT` in the one of its last.

use std::{
    ops::{Deref, DerefMut},
    sync::Arc,
    time::{Duration, Instant},
};

use sqlx::{sqlite::SqliteConnectOptions, ConnectOptions, Connection, SqliteConnection};
use tokio::sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard};

/// How long a write waits for the connection before it gives up, as the
/// pool it replaces did: the writes queued ahead of it are stuck.
const WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub(crate) struct Writer {
    /// The connection, `None` once the store is closed.
    slot: Arc<Mutex<Option<Slot>>>,
    /// When the last holder let go (`HoldTimer`).
    released: Arc<std::sync::Mutex<Instant>>,
}

#[derive(Debug)]
pub(crate) struct Slot {
    conn: SqliteConnection,
    /// A transaction was dropped before it ended: whoever holds the
    /// connection next rolls it back first.
    left_open: bool,
}

/// The connection, held: nothing else writes through it meanwhile.
pub(crate) struct Held {
    // Before the guard, so it stops before the next holder's starts.
    _held: HoldTimer,
    conn: OwnedMappedMutexGuard<Option<Slot>, SqliteConnection>,
}

impl Deref for Held {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        &self.conn
    }
}

impl DerefMut for Held {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.conn
    }
}

/// How long the connection was held, in `HOLD_METRIC` when dropped. The
/// delivery path's writes (ingest, claims, results) and the other writes
/// made through it queue for this one connection, so the sum's rate says
/// how much of the time they kept it busy.
struct HoldTimer {
    since: Instant,
    released: Arc<std::sync::Mutex<Instant>>,
}

/// `/metrics` (see `HoldTimer`).
const HOLD_METRIC: &str = "dakghar_db_writer_hold_seconds";

impl Drop for HoldTimer {
    fn drop(&mut self) {
        let now = Instant::now();
        metrics::histogram!(HOLD_METRIC).record(now.duration_since(self.since).as_secs_f64());
        *self.released.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }
}

impl Writer {
    pub(in crate::store) async fn connect(options: &SqliteConnectOptions) -> sqlx::Result<Self> {
        let conn = options.connect().await?;
        Ok(Self {
            slot: Arc::new(Mutex::new(Some(Slot {
                conn,
                left_open: false,
            }))),
            released: Arc::new(std::sync::Mutex::new(Instant::now())),
        })
    }

    /// The connection, once the writes queued ahead of this one are done
    /// (a fair lock: in the order they asked).
    pub(crate) async fn lock(&self) -> sqlx::Result<Held> {
        let (slot, held) = self.slot().await?;
        Ok(Held {
            _held: held,
            conn: OwnedMappedMutexGuard::map(slot, |s| &mut s.conn),
        })
    }

    /// A transaction, begun with its first statement (`WriteTx::sql`).
    pub(crate) async fn begin(&self) -> sqlx::Result<WriteTx> {
        let (slot, held) = self.slot().await?;
        Ok(WriteTx {
            _held: held,
            slot,
            writer: self.clone(),
            begun: false,
            ended: false,
        })
    }

    async fn slot(&self) -> sqlx::Result<(OwnedMappedMutexGuard<Option<Slot>, Slot>, HoldTimer)> {
        let asked = Instant::now();
        let (held, waited) = match self.slot.clone().try_lock_owned() {
            Ok(held) => (held, false),
            Err(_) => {
                let held = tokio::time::timeout(WAIT, self.slot.clone().lock_owned())
                    .await
                    .map_err(|_| sqlx::Error::PoolTimedOut)?;
                (held, true)
            }
        };
        let mut slot =
            OwnedMutexGuard::try_map(held, Option::as_mut).map_err(|_| sqlx::Error::PoolClosed)?;
        // The fair lock handed the connection over when the holder ahead let
        // go, which under load can be well before this task runs again:
        // that wait for a core is part of the hold.
        let since = if waited {
            asked.max(*self.released.lock().unwrap_or_else(|e| e.into_inner()))
        } else {
            Instant::now()
        };
        let held = HoldTimer {
            since,
            released: Arc::clone(&self.released),
        };
        if slot.left_open {
            match sqlx::query("ROLLBACK").execute(&mut slot.conn).await {
                Ok(_) => {}
                // Nothing to roll back: the `BEGIN` itself failed, or
                // SQLite rolled back on the error.
                Err(sqlx::Error::Database(e))
                    if e.message().contains("no transaction is active") => {}
                // Still open: the next holder tries again.
                Err(e) => return Err(e),
            }
            slot.left_open = false;
        }
        Ok((slot, held))
    }

    /// Closes the connection once the writes queued ahead are done; later
    /// writes fail as on a closed pool.
    pub(crate) async fn close(&self) {
        if let Some(slot) = self.slot.lock().await.take() {
            // Closing only finishes what the thread has; an error here
            // has nothing left to lose.
            let _ = slot.conn.close().await;
        }
    }
}

/// A transaction on the writer. Dropped before it ends (an error the
/// caller passed on with `?`, a caller cancelled mid-way), it is rolled
/// back before the connection's next use, and a task of its own takes
/// the connection to do it at once: until then the file's write lock is
/// held against every other connection.
pub(crate) struct WriteTx {
    // Before the guard, so it stops before the next holder's starts.
    _held: HoldTimer,
    slot: OwnedMappedMutexGuard<Option<Slot>, Slot>,
    writer: Writer,
    /// Its `BEGIN` went out, or may have.
    begun: bool,
    /// Committed.
    ended: bool,
}

impl WriteTx {
    /// `sql`, with the transaction's `BEGIN IMMEDIATE` ahead of it in the
    /// same command if that has not gone out yet. Immediate: the write
    /// lock first, as a read's snapshot that another process's commit
    /// has passed cannot become a write (SQLITE_BUSY_SNAPSHOT, at once,
    /// whatever the busy timeout).
    pub(crate) fn sql(&mut self, sql: &str) -> String {
        if std::mem::replace(&mut self.begun, true) {
            sql.to_owned()
        } else {
            format!("BEGIN IMMEDIATE; {sql}")
        }
    }

    /// `sql` (as `sql` gives it) and then `COMMIT`, for the transaction's
    /// last statement; `committed` says it ran. Its rows, if any, come
    /// back after the commit has run, so a row that fails to decode
    /// cannot roll it back: read them raw and decode after, handling the
    /// failure as a committed write (a lease's last round hands its rows
    /// back), never with a `query_as` whose error would look like a
    /// rollback.
    pub(crate) fn sql_then_commit(&mut self, sql: &str) -> String {
        format!("{}; COMMIT", self.sql(sql))
    }

    /// The writer this transaction holds, for a write after it ends.
    pub(crate) fn writer(&self) -> &Writer {
        &self.writer
    }

    /// The statement from `sql_then_commit` ran: its `COMMIT` with it.
    pub(crate) fn committed(mut self) {
        self.ended = true;
    }

    pub(crate) async fn commit(mut self) -> sqlx::Result<()> {
        if self.begun {
            sqlx::query("COMMIT").execute(&mut *self).await?;
        }
        self.ended = true;
        Ok(())
    }
}

impl Deref for WriteTx {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        &self.slot.conn
    }
}

impl DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.slot.conn
    }
}

impl Drop for WriteTx {
    fn drop(&mut self) {
        if !self.begun || self.ended {
            return;
        }
        self.slot.left_open = true;
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let writer = self.writer.clone();
            runtime.spawn(async move {
                // Its error is the next writer's too, which tries again.
                let _ = writer.lock().await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn writer(dir: &tempfile::TempDir) -> (Writer, SqliteConnectOptions) {
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("w.db"))
            .create_if_missing(true)
            .busy_timeout(Duration::from_millis(100));
        let writer = Writer::connect(&options).await.unwrap();
        write_alone(&writer, "CREATE TABLE t (n INTEGER)").await;
        (writer, options)
    }

    /// `sql` through the writer, outside any transaction.
    async fn write_alone(writer: &Writer, sql: &str) {
        let mut held = writer.lock().await.unwrap();
        sqlx::query(sql).execute(&mut *held).await.unwrap();
    }

    async fn count(options: &SqliteConnectOptions) -> i64 {
        let mut other = options.connect().await.unwrap();
        sqlx::query_scalar("SELECT count(*) FROM t")
            .fetch_one(&mut other)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_transaction_is_one_with_its_first_and_last_statements() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, options) = writer(&dir).await;
        let mut tx = writer.begin().await.unwrap();
        let first = tx.sql("INSERT INTO t VALUES (1)");
        sqlx::query(&first).execute(&mut *tx).await.unwrap();
        assert_eq!(count(&options).await, 0, "not committed yet");
        let last = tx.sql_then_commit("INSERT INTO t VALUES (2)");
        sqlx::query(&last).execute(&mut *tx).await.unwrap();
        tx.committed();
        assert_eq!(count(&options).await, 2);
    }

    #[tokio::test]
    async fn a_transaction_dropped_mid_way_is_rolled_back_before_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, options) = writer(&dir).await;
        let mut tx = writer.begin().await.unwrap();
        let first = tx.sql("INSERT INTO t VALUES (1)");
        sqlx::query(&first).execute(&mut *tx).await.unwrap();
        drop(tx);
        write_alone(&writer, "INSERT INTO t VALUES (3)").await;
        assert_eq!(count(&options).await, 1, "only the write after it");
    }

    #[tokio::test]
    async fn a_transaction_whose_begin_failed_leaves_the_writer_usable() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, options) = writer(&dir).await;
        let mut other = options.connect().await.unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut other)
            .await
            .unwrap();
        let mut tx = writer.begin().await.unwrap();
        let first = tx.sql("INSERT INTO t VALUES (1)");
        let busy = sqlx::query(&first).execute(&mut *tx).await;
        assert!(busy.is_err(), "the other connection holds the write lock");
        drop(tx);
        sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
        write_alone(&writer, "INSERT INTO t VALUES (2)").await;
        assert_eq!(
            count(&options).await,
            1,
            "written, not held in a transaction"
        );
    }

    #[tokio::test]
    async fn a_closed_writer_refuses_writes_as_a_closed_pool_would() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, _) = writer(&dir).await;
        writer.close().await;
        assert!(matches!(writer.lock().await, Err(sqlx::Error::PoolClosed)));
    }
}
