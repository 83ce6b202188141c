//! Rows of the direct connection's statements read into the store's
//! structs.

use rusqlite::types::ValueRef;

use crate::store::{Delivery, DeliveryState};

/// A row of `deliveries`, by column name.
pub(super) fn delivery(row: &rusqlite::Row<'_>) -> rusqlite::Result<Delivery> {
    let state: String = row.get("state")?;
    let state = DeliveryState::parse(&state).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            row.as_ref().column_index("state").unwrap_or(0),
            rusqlite::types::Type::Text,
            format!("unknown delivery state {state:?}").into(),
        )
    })?;
    Ok(Delivery {
        id: row.get("id")?,
        account_id: row.get("account_id")?,
        event_id: row.get("event_id")?,
        endpoint_id: row.get("endpoint_id")?,
        state,
        attempts: row.get("attempts")?,
        attempt_seq: row.get("attempt_seq")?,
        next_attempt_at: row.get("next_attempt_at")?,
        give_up_at: row.get("give_up_at")?,
        claimed_at: row.get("claimed_at")?,
        claim_token: row.get("claim_token")?,
        lease_until: row.get("lease_until")?,
        last_status: row.get("last_status")?,
        last_response: bytes(row, "last_response")?,
        last_error: row.get("last_error")?,
        finished_at: row.get("finished_at")?,
        created_at: row.get("created_at")?,
        updated_at: row.get("updated_at")?,
    })
}

/// A column of bytes as sqlx reads one: a blob, or text as its bytes.
fn bytes(row: &rusqlite::Row<'_>, column: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    Ok(match row.get_ref(column)? {
        ValueRef::Null => None,
        ValueRef::Blob(b) | ValueRef::Text(b) => Some(b.to_vec()),
        other => {
            return Err(rusqlite::Error::FromSqlConversionFailure(
                row.as_ref().column_index(column)?,
                other.data_type(),
                "not bytes".into(),
            ))
        }
    })
}
