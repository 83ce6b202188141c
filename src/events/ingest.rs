//! Ingest (SPEC §3): the event and one pending delivery per subscribed
//! endpoint in one transaction (shared with the events that arrive with
//! it: `store::Ingester`), idempotent on the producer's id, and the
//! workers woken.

use crate::{
    context::Ctx,
    error::Result,
    store::{Delivery, NewEvent, NewIngest, StoreError},
};

/// What an ingest left behind.
#[derive(Debug)]
pub struct Ingested {
    pub deliveries: Vec<Delivery>,
    /// `false` when the id was seen before: nothing new was stored, and
    /// `deliveries` are the first ingest's.
    pub created: bool,
}

/// Stores `new` for every endpoint that wants its type, or for `only` that
/// one endpoint whatever its filter (the dashboard's test event).
pub async fn ingest(ctx: &Ctx, new: NewEvent, only: Option<&str>) -> Result<Ingested> {
    let now = ctx.clock.now();
    let give_up_at = now.plus(ctx.engine.settings().retry_window);
    let (account_id, id) = (new.account_id.clone(), new.id.clone());
    let new = NewIngest {
        event: new,
        only: only.map(str::to_owned),
        now,
        give_up_at,
    };
    let inserted =
        crate::metrics::timed("dakghar_db_ingest_seconds", ctx.ingester.insert(new)).await;
    match inserted {
        Ok(inserted) => {
            ctx.engine.wake().await;
            Ok(Ingested {
                deliveries: inserted.deliveries,
                created: true,
            })
        }
        // The same id again: the first result, nothing new.
        Err(StoreError::Conflict(_)) => Ok(Ingested {
            deliveries: ctx.store.deliveries_of_event(&account_id, &id).await?,
            created: false,
        }),
        Err(e) => Err(e.into()),
    }
}
