//! What stops one attempt from being made or recorded: a fault of ours,
//! never the receiver's (its answers are verdicts, not errors). The claim
//! loop hands the delivery back when it sees one.

use super::signing::SigningError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot sign the request: {0}")]
    Signing(#[from] SigningError),
    #[error("the attempt recorder has stopped")]
    RecorderStopped,
    #[error("recording the attempt failed: {0}")]
    Record(StoreError),
}

impl DeliveryError {
    /// The claim was lost (its lease ran out and another node took the
    /// delivery): nothing to hand back.
    pub fn is_lost_claim(&self) -> bool {
        matches!(self, DeliveryError::Store(StoreError::LostClaim(_)))
    }
}
