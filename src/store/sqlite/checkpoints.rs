//! SQLite's WAL checkpoints, on a thread of their own that runs only
//! when the machine has a core to spare.
//!
//! SQLite copies the log back into the database file in the commit that
//! takes the log past `wal_autocheckpoint` pages (1 000 by default), on
//! the connection that commits: here the one writer, so every write
//! queued behind it waited for the copy and two fsyncs as well. A longer
//! log copies less (a page written many times is copied once), but in
//! the writer's commit each copy then held everything up for ~30 ms.
//! Here a thread with a connection of its own copies the log 200 ms
//! after commits, under `SCHED_IDLE`, so it takes no core from the
//! requests; the writer's connections checkpoint only past
//! `BACKSTOP_PAGES`. Measured against SQLite's own checkpoints at 100 k
//! events × 10 endpoints (README, twenty-fourth pass): burn-down 12 788–
//! 13 045 against 10 358–12 242 deliveries/s, first attempt at 10 % load
//! p99 2.6–6.1 against 7.5–11.4 ms; at the default priority, or at nice
//! 19, the copies came at the worst moments and the knee fell.

use std::{
    path::Path,
    sync::mpsc::{self, RecvTimeoutError},
    thread,
    time::{Duration, Instant},
};

/// How long after a commit the checkpoint starts, so that the commits of
/// that moment share it (and its two fsyncs). At 50 ms (the twenty-third
/// pass) the copies were small and many, and gained nothing.
const GATHER: Duration = Duration::from_millis(200);

/// The log's length (pages) at which the committing connection
/// checkpoints after all. A log starts again from its beginning only at
/// a write that finds all of it copied, which writes that never pause
/// never let happen: this bounds it (some 80 MiB) and then the writer copies
/// only what the thread has not yet.
pub(crate) const BACKSTOP_PAGES: i64 = 20_000;

/// The checkpoint thread of one database file.
#[derive(Debug)]
pub(crate) struct Checkpoints {
    wake: mpsc::SyncSender<()>,
    thread: thread::JoinHandle<()>,
}

impl Checkpoints {
    /// Starts the thread, with its connection to the file at `path`
    /// (already in WAL mode).
    pub(crate) fn start(path: &Path) -> Result<Self, StartError> {
        let conn = rusqlite::Connection::open(path)?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // One wake waiting is enough: the checkpoint it brings covers
        // every commit before it.
        let (wake, woken) = mpsc::sync_channel(1);
        let thread = thread::Builder::new()
            .name("sqlite-checkpoints".into())
            .spawn(move || run(conn, woken))?;
        Ok(Self { wake, thread })
    }

    /// Something may have been committed: a checkpoint follows shortly.
    pub(crate) fn committed(&self) {
        // Full: a wake is already waiting. Gone: the thread has stopped,
        // and the writer's connections checkpoint past the backstop.
        let _ = self.wake.try_send(());
    }

    /// Stops the thread (a checkpoint already due runs first) and closes
    /// its connection. Blocks until then.
    pub(crate) fn stop(self) {
        drop(self.wake);
        if self.thread.join().is_err() {
            tracing::warn!("SQLite's checkpoint thread panicked");
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot start SQLite's checkpoint thread: {0}")]
    Thread(#[from] std::io::Error),
}

fn run(conn: rusqlite::Connection, woken: mpsc::Receiver<()>) {
    idle_priority();
    let mut open = true;
    // Said once a failing spell, not at every commit's checkpoint.
    let mut failing = false;
    while open && woken.recv().is_ok() {
        let at = Instant::now() + GATHER;
        // Wakes meanwhile are covered by this checkpoint; a stop cuts
        // the wait short.
        loop {
            match woken.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(()) => {}
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        // PASSIVE: copies what no reader still needs, never waits for a
        // lock and never holds up the writer.
        match conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(error = %e, "SQLite checkpoints fail; the writer checkpoints past the backstop");
            }
            Ok(()) if failing => {
                failing = false;
                tracing::info!("SQLite checkpoints work again");
            }
            _ => {}
        }
    }
}

/// Puts the calling thread under `SCHED_IDLE`: it runs only when no
/// other thread wants the core. If that fails it runs as before, only at
/// a worse moment.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn idle_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` lives across the call, which only reads it; pid 0
    // is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "SQLite's checkpoint thread keeps its priority");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn idle_priority() {}
