//! SQLite's one writer, held behind a lock rather than in a pool: two
//! connections to the file that take turns, so that only one writes at a
//! time.
//!
//! The delivery path's writes (ingest groups, claims, results) run on a
//! connection of their own, each transaction from `BEGIN IMMEDIATE` to
//! its commit on the caller's thread (`Writer::direct`). Through sqlx,
//! every statement was a round trip to its SQLite thread; under the
//! mixed load each of a transaction's three commands waited for a core
//! there and again on the way back, and the lock was held 92 % of the
//! time while SQLite ran for about half of it. The other writes
//! (`Writer::lock`, the dashboard's and the API's) go through sqlx.

use std::{
    ops::{Deref, DerefMut},
    sync::Arc,
    time::{Duration, Instant},
};

use sqlx::{sqlite::SqliteConnectOptions, ConnectOptions, Connection, SqliteConnection};
use tokio::sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard};

use super::checkpoints::{self, Checkpoints};

/// How long a write waits for the connection before it gives up, as the
/// pool it replaces did: the writes queued ahead of it are stuck.
const WAIT: Duration = Duration::from_secs(30);

/// Takes the file's write lock for a transaction on `conn`, trying again
/// while another connection holds it, as SQLite's busy handler would (at
/// 1, 2, 5, 10, … ms, then every 100 ms), until `busy` has passed. A
/// transaction left open (its rollback failed) is rolled back first.
// `&mut`: a shared `Connection` is not `Sync`, and the wait is an await.
async fn begin_immediate(conn: &mut rusqlite::Connection, busy: Duration) -> rusqlite::Result<()> {
    const WAITS_MS: [u64; 12] = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];
    if !conn.is_autocommit() {
        conn.execute_batch("ROLLBACK")?;
    }
    let started = Instant::now();
    for k in 0.. {
        match conn.execute_batch("BEGIN IMMEDIATE") {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy && started.elapsed() < busy =>
            {
                let wait = Duration::from_millis(WAITS_MS[k.min(WAITS_MS.len() - 1)]);
                tokio::time::sleep(wait.min(busy.saturating_sub(started.elapsed()))).await;
            }
            done => return done,
        }
    }
    unreachable!("the loop returns")
}

/// Rolls back what `direct`'s work began; if even that fails, the next
/// `begin_immediate` tries again before it begins.
fn roll_back(conn: &rusqlite::Connection) {
    if let Err(e) = conn.execute_batch("ROLLBACK") {
        tracing::warn!(error = %e, "could not roll back a write; the next one will");
    }
}

/// Runs `f`, which blocks, on this thread; on a multi-threaded runtime
/// its other tasks move to another thread meanwhile. Bench: run
/// without that hand-over, the knee of the mixed load fell (0.36-0.47 of
/// the burn-down against 0.47-0.55), as requests and attempts queued
/// behind the writes.
fn on_this_thread<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Writer {
    /// The connection, `None` once the store is closed.
    slot: Arc<Mutex<Option<Slot>>>,
    /// When the last holder let go (`HoldTimer`).
    released: Arc<std::sync::Mutex<Instant>>,
    /// How long `direct` waits for another process's write lock.
    busy: Duration,
}

pub(crate) struct Slot {
    conn: SqliteConnection,
    /// For `Writer::direct`.
    direct: rusqlite::Connection,
    /// Told of the commits of both.
    checkpoints: Checkpoints,
}

/// sqlx's connection, held: nothing else writes meanwhile.
pub(crate) struct Held {
    // Before the guard, so it stops before the next holder's starts.
    _held: HoldTimer,
    slot: OwnedMappedMutexGuard<Option<Slot>, Slot>,
}

impl Deref for Held {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        &self.slot.conn
    }
}

impl DerefMut for Held {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.slot.conn
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Whatever its holder committed.
        self.slot.checkpoints.committed();
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

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

/// Why a connection could not be opened or set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    #[error(transparent)]
    Direct(#[from] rusqlite::Error),
    #[error(transparent)]
    Checkpoints(#[from] checkpoints::StartError),
}

impl Writer {
    /// Both connections; the direct one, opened once sqlx's has created
    /// the file and put it in WAL mode, with the pragmas every connection
    /// here has (`sqlite::connect`) and `busy` as its busy timeout.
    pub(in crate::store) async fn connect(
        options: &SqliteConnectOptions,
        busy: Duration,
    ) -> Result<Self, ConnectError> {
        let mut conn = options.connect().await?;
        // The file sqlx's connection opened: a database in memory would
        // be another one for each connection.
        let path = options.get_filename();
        if path.as_os_str().is_empty() || path.to_string_lossy().contains(":memory:") {
            return Err(ConnectError::Sqlx(sqlx::Error::Configuration(
                "SQLite needs a file: a database in memory is one per connection".into(),
            )));
        }
        let direct = rusqlite::Connection::open(path)?;
        // `direct` waits for the write lock itself; once a transaction
        // holds it, nothing in WAL mode waits on another connection.
        direct.busy_timeout(Duration::ZERO)?;
        direct.pragma_update(None, "synchronous", "NORMAL")?;
        direct.pragma_update(None, "foreign_keys", "ON")?;
        // Its statements come in a text per row count, as sqlx's do.
        direct.set_prepared_statement_cache_capacity(1000);
        // The checkpoint thread copies the log; these two only past the
        // backstop.
        direct.pragma_update(None, "wal_autocheckpoint", checkpoints::BACKSTOP_PAGES)?;
        sqlx::query(&format!(
            "PRAGMA wal_autocheckpoint = {}",
            checkpoints::BACKSTOP_PAGES
        ))
        .execute(&mut conn)
        .await?;
        let checkpoints = Checkpoints::start(path)?;
        Ok(Self {
            slot: Arc::new(Mutex::new(Some(Slot {
                conn,
                direct,
                checkpoints,
            }))),
            released: Arc::new(std::sync::Mutex::new(Instant::now())),
            busy,
        })
    }

    /// `work` in a transaction on the direct connection, committed if it
    /// returns `Ok`, else rolled back. Begun `IMMEDIATE`, the write lock
    /// first: a read's snapshot that another process's commit has passed
    /// cannot become a write (SQLITE_BUSY_SNAPSHOT, at once, whatever the
    /// busy timeout). While another process holds that lock this waits
    /// here, asleep, up to `busy` (SQLite's own busy handler would wait
    /// on this thread, and on a single-threaded runtime hold up every
    /// task, the other process's commit included if it is ours). `work`
    /// then runs to its end on this thread, so no cancellation can leave
    /// it half done.
    pub(crate) async fn direct<T, E>(
        &self,
        work: impl FnOnce(&rusqlite::Connection) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<sqlx::Error> + From<rusqlite::Error>,
    {
        let (mut slot, _held) = self.slot().await?;
        let conn = &mut slot.direct;
        begin_immediate(conn, self.busy).await?;
        let done = on_this_thread(|| match work(conn) {
            Ok(done) => match conn.execute_batch("COMMIT") {
                Ok(()) => Ok(done),
                Err(e) => {
                    roll_back(conn);
                    Err(e.into())
                }
            },
            Err(e) => {
                roll_back(conn);
                Err(e)
            }
        });
        if done.is_ok() {
            slot.checkpoints.committed();
        }
        done
    }

    /// The connection, once the writes queued ahead of this one are done
    /// (a fair lock: in the order they asked).
    pub(crate) async fn lock(&self) -> sqlx::Result<Held> {
        let (slot, held) = self.slot().await?;
        Ok(Held { _held: held, slot })
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
        let slot =
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
        Ok((slot, held))
    }

    /// Closes both connections once the writes queued ahead are done;
    /// later writes fail as on a closed pool.
    pub(crate) async fn close(&self) {
        if let Some(slot) = self.slot.lock().await.take() {
            on_this_thread(|| slot.checkpoints.stop());
            // Closing only finishes what the thread has; an error here
            // has nothing left to lose.
            let _ = slot.conn.close().await;
            if let Err((_, e)) = slot.direct.close() {
                tracing::warn!(error = %e, "closing SQLite's direct connection failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreError;

    async fn writer(dir: &tempfile::TempDir) -> (Writer, SqliteConnectOptions) {
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("w.db"))
            .create_if_missing(true)
            .busy_timeout(Duration::from_millis(100));
        let writer = Writer::connect(&options, Duration::from_millis(100))
            .await
            .unwrap();
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

    fn insert(tx: &rusqlite::Connection, n: i64) -> Result<(), StoreError> {
        tx.execute("INSERT INTO t VALUES (?1)", [n])?;
        Ok(())
    }

    #[tokio::test]
    async fn a_direct_transaction_commits_what_its_work_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, options) = writer(&dir).await;
        let done = writer
            .direct(|tx| {
                insert(tx, 1)?;
                insert(tx, 2)?;
                Ok::<_, StoreError>("done")
            })
            .await;
        assert_eq!(done.unwrap(), "done");
        assert_eq!(count(&options).await, 2);
    }

    #[tokio::test]
    async fn a_direct_transaction_whose_work_fails_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, options) = writer(&dir).await;
        let failed = writer
            .direct(|tx| {
                insert(tx, 1)?;
                Err::<(), _>(StoreError::Conflict("row"))
            })
            .await;
        assert!(matches!(failed, Err(StoreError::Conflict(_))));
        assert_eq!(count(&options).await, 0, "its first insert rolled back");
        write_alone(&writer, "INSERT INTO t VALUES (3)").await;
        assert_eq!(count(&options).await, 1, "the writer goes on");
    }

    #[tokio::test]
    async fn a_direct_transaction_that_cannot_lock_the_file_fails_unavailable_and_the_writer_goes_on(
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (writer, options) = writer(&dir).await;
        let mut other = options.connect().await.unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut other)
            .await
            .unwrap();
        let busy = writer.direct(|tx| insert(tx, 1)).await;
        assert!(
            busy.as_ref().is_err_and(StoreError::is_unavailable),
            "the other connection holds the write lock: {busy:?}"
        );
        sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
        writer.direct(|tx| insert(tx, 2)).await.unwrap();
        write_alone(&writer, "INSERT INTO t VALUES (3)").await;
        assert_eq!(count(&options).await, 2);
    }

    /// The log reaches the database file with no checkpoint in a commit:
    /// the writer's connections checkpoint only past the backstop, far
    /// beyond what is written here.
    #[tokio::test]
    async fn the_checkpoint_thread_copies_commits_into_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("w.db");
        let options = SqliteConnectOptions::new()
            .filename(&file)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
        let writer = Writer::connect(&options, Duration::from_millis(100))
            .await
            .unwrap();
        let before = std::fs::metadata(&file).unwrap().len();
        write_alone(&writer, "CREATE TABLE t (n INTEGER, b BLOB)").await;
        // About 1 MB, some 250 pages.
        writer
            .direct(|tx| {
                for n in 0..250 {
                    tx.execute("INSERT INTO t VALUES (?1, zeroblob(4000))", [n])?;
                }
                Ok::<_, StoreError>(())
            })
            .await
            .unwrap();
        let direct: i64 = writer
            .direct(|tx| {
                Ok::<_, StoreError>(tx.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))?)
            })
            .await
            .unwrap();
        let mut held = writer.lock().await.unwrap();
        let through_sqlx: i64 = sqlx::query_scalar("PRAGMA wal_autocheckpoint")
            .fetch_one(&mut *held)
            .await
            .unwrap();
        drop(held);
        assert_eq!(
            (direct, through_sqlx),
            (checkpoints::BACKSTOP_PAGES, checkpoints::BACKSTOP_PAGES)
        );
        // The thread runs when a core is idle: a busy test machine can
        // keep it waiting a while.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::fs::metadata(&file).unwrap().len() < before + 1_000_000 {
            assert!(
                Instant::now() < deadline,
                "no checkpoint copied the log into the file"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Other tests' writers may have theirs running too.
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let policies = checkpoint_thread_policies();
            assert!(
                !policies.is_empty() && policies.iter().all(|&p| p == SCHED_IDLE),
                "checkpoint threads' scheduling policies: {policies:?}"
            );
        }
        writer.close().await;
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    const SCHED_IDLE: u32 = 5;

    /// The scheduling policy (field 41 of `/proc/self/task/*/stat`) of
    /// each thread named as the checkpoint thread is (cut to 15 bytes).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn checkpoint_thread_policies() -> Vec<u32> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|task| {
                let stat = std::fs::read_to_string(task.ok()?.path().join("stat")).ok()?;
                let (name, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
                // Fields from the third on; the policy is the 41st.
                (name == "sqlite-checkpoi").then(|| rest.split(' ').nth(38)?.parse().ok())?
            })
            .collect()
    }

    #[tokio::test]
    async fn a_closed_writer_refuses_writes_as_a_closed_pool_would() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, _) = writer(&dir).await;
        writer.close().await;
        assert!(matches!(writer.lock().await, Err(sqlx::Error::PoolClosed)));
        let direct = writer.direct(|tx| insert(tx, 1)).await;
        assert!(
            matches!(direct, Err(StoreError::Database(sqlx::Error::PoolClosed))),
            "{direct:?}"
        );
    }
}
