//! Each account's fan-out as this node last read it, for Postgres's
//! ingest (migration 0034): the endpoints an event may go to, with the
//! account's `endpoints_version` at the read. The write stores an
//! account's events only while that version is still the account's, so
//! a cached fan-out is never older than a read just before the write
//! would be; one found stale is read again.

use std::sync::Arc;

use super::{bounded::Bounded, ingest::Target};

/// More accounts than one node's producers should send for at once; past
/// it the cache starts again rather than grow.
const MOST: usize = 1_000;

#[derive(Debug)]
pub(super) struct FanOut {
    pub version: i64,
    pub targets: Vec<Target>,
}

/// Account → its fan-out.
pub(super) type FanOuts = Bounded<Arc<FanOut>>;

pub(super) fn empty() -> Arc<FanOuts> {
    Arc::new(Bounded::new(MOST))
}
