//! The nodes of an installation as the database knows them: each serving
//! process writes its row at start and every few seconds after, and claim
//! tokens begin with the id of the node that holds the delivery.

use std::collections::HashMap;

use super::{Pool, Result, Store};
use crate::clock::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Node {
    pub id: String,
    pub role: String,
    pub host: String,
    pub pid: i64,
    pub version: String,
    pub started_at: i64,
    pub seen_at: i64,
}

/// Rows of nodes not seen for this long go (a node that crashed, or a
/// container that is gone).
const FORGET_AFTER_MS: i64 = 24 * 3_600_000;

impl Store {
    /// This process is `node`: writes (or refreshes) its row, forgets nodes
    /// gone for a day.
    pub async fn node_seen(&self, node: &Node) -> Result<()> {
        let sql = "INSERT INTO nodes (id, role, host, pid, version, started_at, seen_at) \
                   VALUES ($1, $2, $3, $4, $5, $6, $7) \
                   ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at";
        let forget = "DELETE FROM nodes WHERE seen_at < $1";
        on_pool!(self, |p| {
            sqlx::query(sql)
                .bind(&node.id)
                .bind(&node.role)
                .bind(&node.host)
                .bind(node.pid)
                .bind(&node.version)
                .bind(node.started_at)
                .bind(node.seen_at)
                .execute(p)
                .await?;
            sqlx::query(forget)
                .bind(node.seen_at - FORGET_AFTER_MS)
                .execute(p)
                .await
                .map(drop)
        })?;
        Ok(())
    }

    /// Every node the database knows, most recently seen first.
    pub async fn nodes(&self) -> Result<Vec<Node>> {
        let sql = "SELECT * FROM nodes ORDER BY seen_at DESC, id";
        Ok(on_pool!(self, |p| sqlx::query_as::<_, Node>(sql)
            .fetch_all(p)
            .await)?)
    }

    /// Deliveries in flight per node id (the front of their claim token;
    /// `""` for claims of a process that named no node).
    pub async fn in_flight_by_node(&self) -> Result<HashMap<String, i64>> {
        let sql = "SELECT claim_token FROM deliveries WHERE state = 'in_flight'";
        let tokens: Vec<Option<String>> =
            on_pool!(self, |p| sqlx::query_scalar(sql).fetch_all(p).await)?;
        let mut by_node = HashMap::new();
        for token in tokens.into_iter().flatten() {
            let node = token.split_once('.').map_or("", |(n, _)| n).to_string();
            *by_node.entry(node).or_insert(0) += 1;
        }
        Ok(by_node)
    }

    /// Dead letters (failed or expired) that ended since `since`.
    pub async fn dead_letters_since(&self, since: Timestamp) -> Result<i64> {
        let sql = "SELECT count(*) FROM deliveries \
                   WHERE state IN ('failed', 'expired') AND finished_at >= $1";
        Ok(on_pool!(self, |p| sqlx::query_scalar(sql)
            .bind(since.millis())
            .fetch_one(p)
            .await)?)
    }

    /// Endpoints paused by their customer or by Dakghar.
    pub async fn paused_endpoints(&self) -> Result<i64> {
        let sql = "SELECT count(*) FROM endpoints WHERE state = 'paused'";
        Ok(on_pool!(self, |p| sqlx::query_scalar(sql)
            .fetch_one(p)
            .await)?)
    }

    /// A claim token for this process: its node id, if it has one, then a
    /// random part.
    pub(super) fn claim_token(&self) -> String {
        let random = crate::ids::random_token(16);
        match &self.node {
            Some(node) => format!("{node}.{random}"),
            None => random,
        }
    }

    /// This store's claims carry `node` (see `claim_token`).
    pub fn for_node(mut self, node: &str) -> Store {
        self.node = Some(std::sync::Arc::from(node));
        self
    }
}
