//! The retention job: every hour, delete finished history older than the
//! retention period in batches, writing it to a JSON Lines archive first
//! when an archive directory is configured.

use std::{
    io::Write,
    path::{Path, PathBuf},
    time::Duration,
};

use base64::Engine as _;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::{
    clock::{SharedClock, Timestamp},
    store::{Attempt, Delivery, Event, OldHistory, Store, StoreError},
};

const BATCH: i64 = 500;

#[derive(Debug, Clone)]
pub struct RetentionSettings {
    /// Finished deliveries older than this are deleted; `None` keeps all.
    pub keep: Option<Duration>,
    pub archive_dir: Option<PathBuf>,
    pub every: Duration,
}

impl Default for RetentionSettings {
    fn default() -> Self {
        RetentionSettings {
            keep: Some(Duration::from_secs(90 * 24 * 3600)),
            archive_dir: None,
            every: Duration::from_secs(3600),
        }
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Purged {
    pub deliveries: u64,
    pub events: u64,
    pub archived: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write the archive {0}: {1}")]
    Archive(PathBuf, std::io::Error),
}

/// One full pass: batches until nothing older than the cutoff is left.
pub async fn run_once(
    store: &Store,
    settings: &RetentionSettings,
    now: Timestamp,
) -> Result<Purged, RetentionError> {
    let Some(keep) = settings.keep else {
        return Ok(Purged::default());
    };
    let cutoff = Timestamp(now.millis() - i64::try_from(keep.as_millis()).unwrap_or(i64::MAX));
    let mut purged = Purged::default();
    loop {
        let batch = store.old_history(cutoff, BATCH).await?;
        if batch.deliveries.is_empty() {
            break;
        }
        if let Some(dir) = &settings.archive_dir {
            // Written and synced before anything is deleted: a crash in
            // between archives twice, never loses a line.
            purged.archived += archive(dir, &batch, now)?;
        }
        let (deliveries, events) = store.delete_history(&batch).await?;
        purged.deliveries += deliveries;
        purged.events += events;
    }
    loop {
        let n = store.delete_orphan_events(cutoff, BATCH).await?;
        purged.events += n;
        if n == 0 {
            break;
        }
    }
    Ok(purged)
}

/// One line of the archive (and of `dakghar events export`): a delivery
/// with its event and attempts, payloads and bodies in base64. An event
/// without deliveries has null delivery fields and no attempts.
pub fn history_line(e: &Event, d: Option<&Delivery>, attempts: &[Attempt]) -> serde_json::Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    let attempts: Vec<_> = attempts
        .iter()
        .map(|a| {
            json!({
                "attempt": a.attempt,
                "started_at": a.started_at,
                "duration_ms": a.duration_ms,
                "status": a.response_status,
                "classification": a.classification,
                "error": a.error,
                "request_headers": serde_json::from_str::<serde_json::Value>(&a.request_headers).unwrap_or_default(),
                "response_body_base64": a.response_body.as_ref().map(|b| b64.encode(b)),
            })
        })
        .collect();
    json!({
        "account_id": e.account_id,
        "delivery_id": d.map(|d| &d.id),
        "endpoint_id": d.map(|d| &d.endpoint_id),
        "state": d.map(|d| d.state.as_str()),
        "created_at": d.map_or(e.created_at, |d| d.created_at),
        "finished_at": d.and_then(|d| d.finished_at),
        "last_error": d.and_then(|d| d.last_error.as_ref()),
        "event": {
            "id": e.id,
            "type": e.event_type,
            "created_at": e.created_at,
            "payload_base64": b64.encode(&e.payload),
        },
        "attempts": attempts,
    })
}

fn archive(dir: &Path, batch: &OldHistory, now: Timestamp) -> Result<u64, RetentionError> {
    let fail = |e| RetentionError::Archive(dir.to_path_buf(), e);
    std::fs::create_dir_all(dir).map_err(fail)?;
    let day = now.to_rfc3339().get(..10).unwrap_or("archive").to_string();
    let path = dir.join(format!("dakghar-{day}.jsonl"));
    let fail = |e| RetentionError::Archive(path.clone(), e);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(fail)?;
    let mut lines = 0;
    for (d, e, attempts) in &batch.deliveries {
        let line = history_line(e, Some(d), attempts);
        writeln!(file, "{line}").map_err(fail)?;
        lines += 1;
    }
    file.sync_all().map_err(fail)?;
    Ok(lines)
}

/// Runs `run_once` every `settings.every` until `shutdown`; nothing when
/// everything is kept.
pub fn spawn(
    store: Store,
    clock: SharedClock,
    settings: RetentionSettings,
    shutdown: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    settings.keep?;
    let every = settings.every;
    Some(super::every(every, shutdown, move || {
        let (store, clock, settings) = (store.clone(), clock.clone(), settings.clone());
        async move {
            match run_once(&store, &settings, clock.now()).await {
                Ok(p) if p.deliveries + p.events > 0 => tracing::info!(
                    deliveries = p.deliveries,
                    events = p.events,
                    archived = p.archived,
                    "retention removed old history"
                ),
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "retention pass failed; will try again"),
            }
        }
    }))
}
