//! Rows of the direct connection's statements read into the store's
//! structs.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};

use crate::store::{CircuitState, Delivery, DeliveryState, Endpoint, EndpointState};

/// A column of bytes as sqlx reads one: a blob, or text as its bytes.
fn bytes(row: &rusqlite::Row<'_>, column: usize) -> rusqlite::Result<Option<Vec<u8>>> {
    Ok(match row.get_ref(column)? {
        ValueRef::Null => None,
        ValueRef::Blob(b) | ValueRef::Text(b) => Some(b.to_vec()),
        other => {
            return Err(rusqlite::Error::FromSqlConversionFailure(
                column,
                other.data_type(),
                "not bytes".into(),
            ))
        }
    })
}

/// A struct read from a row by position, its columns named as its
/// fields: `$columns` lists them for a `SELECT` in the order `$read`
/// takes them, each with `Row::get` or the reader named after it. (By
/// name, each field walks the statement's column names: some 9 µs a row
/// of `endpoints`.)
macro_rules! read_by_position {
    ($(#[$doc:meta])* $columns:ident, $read:ident -> $ty:ident {
        $($field:ident $(with $reader:ident)?),+ $(,)?
    }) => {
        #[doc = concat!("The columns `", stringify!($read), "` reads, in its order.")]
        pub(super) const $columns: &str = stringify!($($field),+);

        $(#[$doc])*
        pub(super) fn $read(row: &rusqlite::Row<'_>) -> rusqlite::Result<$ty> {
            let mut column = 0;
            let mut next = || {
                column += 1;
                column - 1
            };
            Ok($ty {
                $($field: read_by_position!(@field row, next() $(, $reader)?)),+
            })
        }
    };
    (@field $row:ident, $at:expr) => { $row.get($at)? };
    (@field $row:ident, $at:expr, $reader:ident) => { $reader($row, $at)? };
}

read_by_position! {
    /// A row of `deliveries`.
    DELIVERY_COLUMNS, delivery -> Delivery {
        id, account_id, event_id, endpoint_id, state, attempts, attempt_seq,
        next_attempt_at, give_up_at, claimed_at, claim_token, lease_until,
        last_status, last_response with bytes, last_error, finished_at,
        created_at, updated_at,
    }
}

read_by_position! {
    /// A row of `endpoints`, as stored (secrets sealed).
    ENDPOINT_COLUMNS, endpoint -> Endpoint {
        id, account_id, url, description, event_types, secret, previous_secret,
        previous_secret_expires_at, state, pause_reason, rate_limit_per_sec,
        max_in_flight, failure_streak, transient_streak, failing_since,
        last_success_at, circuit_state, circuit_open_until, circuit_cooldown_ms,
        alert_level, alert_expiry_for, alert_summary_at, throttled_until,
        throttled_at, throttle_status, throttle_streak, adaptive_cap, cap_cut_at,
        success_run, retry_strategy, retry_statuses, paused_at, fault, fault_at,
        fault_streak, created_at, updated_at,
    }
}

/// A state column's text as its enum; a text no version writes does not
/// decode, as with sqlx.
macro_rules! state_from_text {
    ($($ty:ty),+) => {
        $(impl FromSql for $ty {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                <$ty>::try_from(value.as_str()?.to_string())
                    .map_err(|e| FromSqlError::Other(Box::new(e)))
            }
        })+
    };
}

state_from_text!(DeliveryState, EndpointState, CircuitState);
