//! Group commit: writes that arrive at about the same time share one
//! transaction. Under load the groups grow by themselves; when idle each
//! write goes out the moment it arrives, or, for a writer whose callers
//! can spare it, once the writes it knows are coming have arrived (a
//! short `Linger`). Ingest (`Ingester`) and attempt results
//! (`delivery::Recorder`) both write this way.

use std::{future::Future, pin::Pin, time::Duration};

use tokio::sync::{mpsc, oneshot};

use super::Result;

/// Writes a group in one transaction: an answer per item, in order, or an
/// `Err` when nothing of the group was written.
pub type WriteGroup<I, O> = Box<dyn for<'a> Fn(&'a [I]) -> Written<'a, O> + Send + Sync>;

/// What a `WriteGroup` returns.
pub type Written<'a, O> = Pin<Box<dyn Future<Output = Result<Vec<Result<O>>>> + Send + 'a>>;

type Reply<O> = oneshot::Sender<Result<O>>;

/// How a short group waits for more before it is written.
pub struct Linger {
    /// The longest a group waits.
    pub at_most: Duration,
    /// Whether more writes are on their way, given the group's size.
    pub more_coming: Box<dyn Fn(usize) -> bool + Send + Sync>,
}

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
    /// Starts the writer task; it ends once every handle is dropped. A
    /// group short of `max_group` waits as `linger` says, if given.
    /// `what` names the items in the log.
    pub fn start(
        max_group: usize,
        linger: Option<Linger>,
        what: &'static str,
        write: WriteGroup<I, O>,
    ) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_groups(rx, max_group, linger, what, write));
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
    linger: Option<Linger>,
    what: &'static str,
    write: WriteGroup<I, O>,
) {
    let mut group = Vec::with_capacity(max_group);
    while rx.recv_many(&mut group, max_group).await > 0 {
        if let Some(linger) = &linger {
            let until = tokio::time::Instant::now() + linger.at_most;
            while group.len() < max_group && (linger.more_coming)(group.len()) {
                let room = max_group - group.len();
                match tokio::time::timeout_at(until, rx.recv_many(&mut group, room)).await {
                    Ok(n) if n > 0 => {}
                    // Waited long enough, or every handle is gone.
                    _ => break,
                }
            }
        }
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

#[cfg(test)]
mod tests {
    use std::{
        sync::{Arc, Mutex},
        time::{Duration, Instant},
    };

    use super::{GroupCommit, Linger};

    /// Longer than any test waits unless a group lingers when it should not.
    const LONG: Duration = Duration::from_secs(30);

    /// A writer that keeps the sizes of the groups it wrote.
    fn writer(linger: Option<Linger>) -> (GroupCommit<u32, u32>, Arc<Mutex<Vec<usize>>>) {
        let groups = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&groups);
        let commit = GroupCommit::start(
            16,
            linger,
            "numbers",
            Box::new(move |group: &[u32]| {
                seen.lock().unwrap().push(group.len());
                let answers = group.iter().map(|n| Ok(*n)).collect();
                Box::pin(async move { Ok(answers) })
            }),
        );
        (commit, groups)
    }

    fn lingering(at_most: Duration, more_coming: fn(usize) -> bool) -> Option<Linger> {
        Some(Linger {
            at_most,
            more_coming: Box::new(more_coming),
        })
    }

    async fn write(commit: &GroupCommit<u32, u32>, n: u32) -> u32 {
        commit.write(n).await.unwrap().unwrap()
    }

    #[tokio::test]
    async fn a_group_waits_for_the_writes_on_their_way() {
        let (commit, groups) = writer(lingering(LONG, |n| n < 2));
        let (a, b) = tokio::join!(write(&commit, 1), async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            write(&commit, 2).await
        });
        assert_eq!((a, b), (1, 2));
        assert_eq!(*groups.lock().unwrap(), [2], "one transaction");
    }

    #[tokio::test]
    async fn a_group_with_nothing_on_its_way_goes_at_once() {
        for linger in [lingering(LONG, |_| false), None] {
            let (commit, groups) = writer(linger);
            let started = Instant::now();
            assert_eq!(write(&commit, 1).await, 1);
            assert_eq!(write(&commit, 2).await, 2);
            assert!(started.elapsed() < LONG, "written without waiting");
            assert_eq!(*groups.lock().unwrap(), [1, 1]);
        }
    }

    #[tokio::test]
    async fn a_group_waits_no_longer_than_its_linger() {
        let linger = Duration::from_millis(50);
        let (commit, groups) = writer(lingering(linger, |_| true));
        let started = Instant::now();
        assert_eq!(write(&commit, 1).await, 1);
        assert!(started.elapsed() >= linger);
        assert!(started.elapsed() < LONG);
        assert_eq!(*groups.lock().unwrap(), [1]);
    }
}
