//! Group commit: writes that arrive at about the same time share one
//! transaction. Under load the groups grow by themselves; when idle each
//! write goes out the moment it arrives. Ingest (`Ingester`) and attempt
//! results (`delivery::Recorder`) both write this way.

use std::{future::Future, pin::Pin, sync::Arc};

use tokio::sync::{mpsc, oneshot, Mutex};

use super::Result;

/// Writes a group in one transaction: an answer per item, in order, or an
/// `Err` when nothing of the group was written.
pub type WriteGroup<I, O> = Box<dyn for<'a> Fn(&'a [I]) -> Written<'a, O> + Send + Sync>;

/// What a `WriteGroup` returns.
pub type Written<'a, O> = Pin<Box<dyn Future<Output = Result<Vec<Result<O>>>> + Send + 'a>>;

type Reply<O> = oneshot::Sender<Result<O>>;

/// The queue's far end, shared by the writers.
type Pending<I, O> = Arc<Mutex<mpsc::UnboundedReceiver<(I, Reply<O>)>>>;

pub struct GroupCommit<I, O> {
    queue: mpsc::UnboundedSender<(I, Reply<O>)>,
}

impl<I, O> Clone for GroupCommit<I, O> {
    fn clone(&self) -> Self {
        GroupCommit {
            queue: self.queue.clone(),
        }
    }
}

impl<I, O> std::fmt::Debug for GroupCommit<I, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

impl<I: Send + Sync + 'static, O: Send + 'static> GroupCommit<I, O> {
    /// Starts the writer task; it ends once every handle is dropped. `what`
    /// names the items in the log.
    pub fn start(max_group: usize, what: &'static str, write: WriteGroup<I, O>) -> Self {
        Self::start_parallel(1, max_group, what, write)
    }

    /// Like `start`, with `writers` transactions open at once. One writer
    /// makes every item that arrives during a commit wait for that commit
    /// and then its own; with two, the second takes them at once. Only
    /// for writes that may commit in any order (each item answers for
    /// itself, and no two conflict but on a key the database guards).
    pub fn start_parallel(
        writers: usize,
        max_group: usize,
        what: &'static str,
        write: WriteGroup<I, O>,
    ) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        let rx = Arc::new(Mutex::new(rx));
        let write = Arc::new(write);
        for _ in 0..writers.max(1) {
            tokio::spawn(write_groups(
                Arc::clone(&rx),
                max_group,
                what,
                Arc::clone(&write),
            ));
        }
        GroupCommit { queue }
    }

    /// Writes one item; its answer once committed, `None` when the writer
    /// has stopped (the node is shutting down).
    pub async fn write(&self, item: I) -> Option<Result<O>> {
        let (reply, answer) = oneshot::channel();
        self.queue.send((item, reply)).ok()?;
        answer.await.ok()
    }
}

async fn write_groups<I, O>(
    rx: Pending<I, O>,
    max_group: usize,
    what: &'static str,
    write: Arc<WriteGroup<I, O>>,
) {
    let mut group = Vec::with_capacity(max_group);
    // The lock is held only while waiting for items, never while writing.
    while rx.lock().await.recv_many(&mut group, max_group).await > 0 {
        let (items, replies): (Vec<_>, Vec<_>) = group.drain(..).unzip();
        match write(&items).await {
            Ok(answers) => {
                for (reply, answer) in replies.into_iter().zip(answers) {
                    let _ = reply.send(answer);
                }
                continue;
            }
            // Nothing of the group was written. A transient error (a
            // deadlock) clears, and one item's fault must not fail the
            // others: each is tried on its own and answers for itself.
            Err(e) if items.len() > 1 => {
                tracing::warn!(error = %e, count = items.len(), "writing a group of {what} failed; writing them one by one");
            }
            Err(e) => {
                if let Some(reply) = replies.into_iter().next() {
                    let _ = reply.send(Err(e));
                }
                continue;
            }
        }
        for (item, reply) in items.iter().zip(replies) {
            let answer = match write(std::slice::from_ref(item)).await {
                Ok(mut one) => one
                    .pop()
                    .unwrap_or_else(|| Err(super::StoreError::NotFound)),
                Err(e) => Err(e),
            };
            let _ = reply.send(answer);
        }
    }
}
