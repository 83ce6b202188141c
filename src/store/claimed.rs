//! What a claimed batch needs before it can be sent: its endpoints and its
//! events, read in two queries for the whole batch rather than two per
//! delivery.

use std::collections::HashMap;

use super::{placeholders, Delivery, Endpoint, Event, Pool, Result, Store};

#[derive(Debug, Default)]
pub struct BatchInputs {
    pub endpoints: HashMap<String, Endpoint>,
    /// By delivery id.
    pub events: HashMap<String, Event>,
}

impl Store {
    pub async fn batch_inputs(&self, claimed: &[Delivery]) -> Result<BatchInputs> {
        if claimed.is_empty() {
            return Ok(BatchInputs::default());
        }
        let mut endpoint_ids: Vec<&str> = claimed.iter().map(|d| d.endpoint_id.as_str()).collect();
        endpoint_ids.sort_unstable();
        endpoint_ids.dedup();
        let endpoints_sql = format!(
            "SELECT * FROM endpoints WHERE id IN ({})",
            placeholders(1, endpoint_ids.len())
        );
        let events_sql = format!(
            "SELECT d.id AS delivery_id, e.* FROM deliveries d \
             JOIN events e ON e.account_id = d.account_id AND e.id = d.event_id \
             WHERE d.id IN ({})",
            placeholders(1, claimed.len())
        );
        let (endpoints, events) = on_pool!(self, |p| {
            let mut q = sqlx::query_as::<_, Endpoint>(&endpoints_sql);
            for id in &endpoint_ids {
                q = q.bind(*id);
            }
            let endpoints = q.fetch_all(p).await?;
            let mut q = sqlx::query_as::<_, WithDelivery>(&events_sql);
            for d in claimed {
                q = q.bind(&d.id);
            }
            let events = q.fetch_all(p).await?;
            Ok::<_, sqlx::Error>((endpoints, events))
        })?;
        Ok(BatchInputs {
            endpoints: self
                .opened_all(endpoints)?
                .into_iter()
                .map(|e| (e.id.clone(), e))
                .collect(),
            events: events
                .into_iter()
                .map(|w| (w.delivery_id, w.event))
                .collect(),
        })
    }
}

#[derive(sqlx::FromRow)]
struct WithDelivery {
    delivery_id: String,
    #[sqlx(flatten)]
    event: Event,
}
