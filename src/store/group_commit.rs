//! Group commit: writes that arrive at about the same time share one
//! transaction. Under load the groups grow by themselves; when idle each
//! write goes out the moment it arrives. Ingest (`Ingester`) and attempt
//! results (`delivery::Recorder`) both write this way.

use std::{future::Future, pin::Pin};

use tokio::sync::{mpsc, oneshot};

use super::Result;

/// Writes a group in one transaction: an answer per item, in order, or an
/// `Err` when nothing of the group was written.
pub type WriteGroup<I, O> = Box<dyn for<'a> Fn(&'a [I]) -> Written<'a, O> + Send + Sync>;

/// What a `WriteGroup` returns.
pub type Written<'a, O> = Pin<Box<dyn Future<Output = Result<Vec<Result<O>>>> + Send + 'a>>;

type Reply<O> = oneshot::Sender<Result<O>>;

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
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_groups(rx, max_group, what, write));
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
    mut rx: mpsc::UnboundedReceiver<(I, Reply<O>)>,
    max_group: usize,
    what: &'static str,
    write: WriteGroup<I, O>,
) {
    let mut group = Vec::with_capacity(max_group);
    while rx.recv_many(&mut group, max_group).await > 0 {
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
