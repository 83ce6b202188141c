//! Lease rescue: returns in-flight deliveries whose lease ran out (their
//! node crashed or hung) to pending, without counting an attempt. The
//! claim loops call it before they claim, so a lost claim comes back
//! wherever workers run.

use std::{sync::Mutex, time::Duration};

use crate::{
    clock::Timestamp,
    store::{Store, StoreError},
};

#[derive(Debug)]
pub struct LeaseRescuer {
    store: Store,
    /// When this node last looked.
    last: Mutex<Option<Timestamp>>,
}

impl LeaseRescuer {
    pub fn new(store: Store) -> LeaseRescuer {
        LeaseRescuer {
            store,
            last: Mutex::new(None),
        }
    }

    /// Expired leases are rare (a crashed node); looking once a second is
    /// plenty and keeps a write off every claim.
    pub async fn now_and_then(&self, now: Timestamp) -> Result<(), StoreError> {
        {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|at| at <= now && at.until(now) < Duration::from_secs(1)) {
                return Ok(());
            }
            *last = Some(now);
        }
        let rescued = self.store.rescue_expired_leases(now).await?;
        if rescued > 0 {
            tracing::warn!(
                rescued,
                "returned deliveries with expired leases to pending"
            );
        }
        Ok(())
    }
}
