//! Rows as stored. Every integer is an `i64` and every time a Unix-millisecond
//! `i64`, so the same structs decode from SQLite and Postgres.

use serde::Serialize;
use sqlx::FromRow;

/// A state column read back with a value no version of Dakghar writes.
#[derive(Debug, thiserror::Error)]
#[error("unknown {column} {value:?}")]
pub struct UnknownState {
    column: &'static str,
    value: String,
}

/// A state kept in a TEXT column as the same words as always: the enum,
/// its text, and reading it back.
macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident as $column:literal { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
        #[serde(try_from = "String")]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            pub const ALL: [$name; [$($text),+].len()] = [$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.into_iter().find(|v| v.as_str() == s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = UnknownState;

            fn try_from(value: String) -> Result<Self, UnknownState> {
                Self::parse(&value).ok_or(UnknownState { column: $column, value })
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

text_enum! {
    /// Where a delivery is: waiting, being sent, or finished one way or
    /// another (`failed` and `expired` are the dead-letter queue).
    DeliveryState as "delivery state" {
        Pending = "pending",
        InFlight = "in_flight",
        Delivered = "delivered",
        Failed = "failed",
        Expired = "expired",
    }
}

impl DeliveryState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            DeliveryState::Delivered | DeliveryState::Failed | DeliveryState::Expired
        )
    }
}

text_enum! {
    /// Whether an endpoint receives: a paused one still queues (SPEC §3).
    EndpointState as "endpoint state" {
        Active = "active",
        Paused = "paused",
        /// Gets nothing, not even queued deliveries.
        Disabled = "disabled",
    }
}

text_enum! {
    /// A user's role in their account (SPEC §10). Installation admins are
    /// `users.role`, apart from this.
    AccountRole as "account role" {
        /// The team, API keys, everything.
        Owner = "owner",
        /// Endpoints, secrets, resend.
        Developer = "developer",
        /// Reads only.
        Viewer = "viewer",
    }
}

text_enum! {
    /// What a single-use link does when it is opened.
    LinkKind as "link kind" {
        /// Joins the account with a role, once a password is set (72 h).
        Invitation = "invitation",
        /// Sets a new password and ends the user's sessions (30 min).
        PasswordReset = "password_reset",
        /// Signs a browser into the account with a role until its ttl.
        Portal = "portal",
    }
}

text_enum! {
    /// The endpoint's circuit breaker (SPEC §4).
    CircuitState as "circuit state" {
        Closed = "closed",
        /// No attempts until the cooldown passes.
        Open = "open",
        /// One trial delivery decides.
        HalfOpen = "half_open",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, FromRow, Serialize)]
pub struct Account {
    pub id: String,
    pub name: String,
    pub created_at: i64,
    /// The platform's own id for this customer, unique when set.
    pub external_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Member,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Member => "member",
            Role::Admin => "admin",
        }
    }
}

/// Deliberately not `Serialize`: the password hash must never leave the server.
#[derive(Debug, Clone, FromRow)]
pub struct User {
    pub id: String,
    pub account_id: String,
    pub email: String,
    pub password_hash: String,
    pub role: String,
    pub created_at: i64,
    /// What the user may do in their account (an admin's role too).
    #[sqlx(try_from = "String")]
    pub account_role: AccountRole,
    /// Sessions signed in at an older epoch are over (a password reset).
    pub session_epoch: i64,
}

impl User {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin.as_str()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct ApiKey {
    pub id: String,
    pub account_id: String,
    pub prefix: String,
    pub key_hash: String,
    pub is_admin: bool,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
    /// What the key is for, as its creator named it; may be empty.
    pub name: String,
    /// To the minute: uses are recorded at most once a minute.
    pub last_used_at: Option<i64>,
}

/// A key of the platform: it acts on any account.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct PlatformKey {
    pub id: String,
    pub prefix: String,
    pub key_hash: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
    pub name: String,
    pub last_used_at: Option<i64>,
}

/// A single-use link; `secret_hash` is all that is kept of its secret.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct AccessLink {
    pub id: String,
    #[sqlx(try_from = "String")]
    pub kind: LinkKind,
    pub secret_hash: String,
    pub account_id: String,
    pub user_id: Option<String>,
    pub email: Option<String>,
    pub role: Option<String>,
    pub return_url: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub used_at: Option<i64>,
}

/// A browser signed in through a portal link.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct PortalSession {
    pub link_id: String,
    pub account_id: String,
    #[sqlx(try_from = "String")]
    pub role: AccountRole,
    pub return_url: Option<String>,
    pub expires_at: i64,
}

/// `Deserialize` reads the row as Postgres's `row_to_json` writes it, as
/// a claim sends it along (`ReadAlong`).
#[derive(Debug, Clone, PartialEq, Eq, FromRow, serde::Deserialize)]
pub struct Endpoint {
    pub id: String,
    pub account_id: String,
    pub url: String,
    pub description: String,
    /// JSON array of event types; empty means every type.
    pub event_types: String,
    pub secret: String,
    pub previous_secret: Option<String>,
    pub previous_secret_expires_at: Option<i64>,
    #[sqlx(try_from = "String")]
    pub state: EndpointState,
    pub pause_reason: Option<String>,
    pub rate_limit_per_sec: Option<i64>,
    pub max_in_flight: i64,
    pub failure_streak: i64,
    pub transient_streak: i64,
    pub failing_since: Option<i64>,
    pub last_success_at: Option<i64>,
    #[sqlx(try_from = "String")]
    pub circuit_state: CircuitState,
    pub circuit_open_until: Option<i64>,
    pub circuit_cooldown_ms: i64,
    /// 0, or the highest "failing" alert sent since the last success.
    pub alert_level: i64,
    pub alert_expiry_for: Option<i64>,
    pub alert_summary_at: Option<i64>,
    /// A 429/503 holds the endpoint's work until then.
    pub throttled_until: Option<i64>,
    pub throttled_at: Option<i64>,
    pub throttle_status: Option<i64>,
    pub throttle_streak: i64,
    /// The adaptive in-flight cap; `None` is at `max_in_flight`.
    pub adaptive_cap: Option<i64>,
    pub cap_cut_at: Option<i64>,
    pub success_run: i64,
    /// The endpoint's own retry policy; `None` is the installation's.
    pub retry_strategy: Option<String>,
    pub retry_statuses: Option<String>,
    /// Since when it is paused; `None` while not paused.
    pub paused_at: Option<i64>,
    /// A fault on our side keeping its deliveries from being sent, since
    /// `fault_at`, `fault_streak` times in a row; cleared by a success.
    pub fault: Option<String>,
    pub fault_at: Option<i64>,
    pub fault_streak: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

#[cfg(test)]
impl Endpoint {
    /// An active endpoint with the defaults, for table tests.
    pub fn example() -> Endpoint {
        Endpoint {
            id: "ep_1".into(),
            account_id: "acc_1".into(),
            url: "https://hooks.example.com/".into(),
            description: String::new(),
            event_types: "[]".into(),
            secret: String::new(),
            previous_secret: None,
            previous_secret_expires_at: None,
            state: EndpointState::Active,
            pause_reason: None,
            rate_limit_per_sec: None,
            max_in_flight: 10,
            failure_streak: 0,
            transient_streak: 0,
            failing_since: None,
            last_success_at: None,
            circuit_state: CircuitState::Closed,
            circuit_open_until: None,
            circuit_cooldown_ms: 0,
            alert_level: 0,
            alert_expiry_for: None,
            alert_summary_at: None,
            throttled_until: None,
            throttled_at: None,
            throttle_status: None,
            throttle_streak: 0,
            adaptive_cap: None,
            cap_cut_at: None,
            success_run: 0,
            retry_strategy: None,
            retry_statuses: None,
            paused_at: None,
            fault: None,
            fault_at: None,
            fault_streak: 0,
            created_at: 0,
            updated_at: 0,
        }
    }
}

impl Endpoint {
    /// The adaptive in-flight cap: `max_in_flight`, lowered while the
    /// receiver shows overload (the claim's rule, `claim_slots`, with one
    /// trial while the circuit is not closed).
    pub fn adaptive_in_flight(&self) -> i64 {
        self.adaptive_cap
            .map_or(self.max_in_flight, |c| c.min(self.max_in_flight))
    }

    /// The throttle in force at `now`, if any: until when, and the status
    /// that asked for it.
    pub fn throttle_at(&self, now: i64) -> Option<(i64, Option<i64>)> {
        self.throttled_until
            .filter(|until| *until > now)
            .map(|until| (until, self.throttle_status))
    }

    pub fn event_type_filter(&self) -> Vec<String> {
        serde_json::from_str(&self.event_types).unwrap_or_default()
    }

    pub fn wants(&self, event_type: &str) -> bool {
        wants(&self.event_type_filter(), event_type)
    }
}

/// An empty filter subscribes to every event type.
pub(super) fn wants(filter: &[String], event_type: &str) -> bool {
    filter.is_empty() || filter.iter().any(|t| t == event_type)
}

#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct Event {
    pub account_id: String,
    pub id: String,
    pub event_type: String,
    pub payload: Vec<u8>,
    pub created_at: i64,
    /// The ingest span's W3C traceparent (`--otlp-endpoint`); queries that
    /// have no use for it leave it out.
    #[sqlx(default)]
    pub traceparent: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct Delivery {
    pub id: String,
    pub account_id: String,
    pub event_id: String,
    pub endpoint_id: String,
    #[sqlx(try_from = "String")]
    pub state: DeliveryState,
    /// Failed attempts since the last (re)send: the backoff counter.
    pub attempts: i64,
    /// Highest attempt number ever used; never reused, also across resends.
    pub attempt_seq: i64,
    pub next_attempt_at: i64,
    pub give_up_at: i64,
    pub claimed_at: Option<i64>,
    pub claim_token: Option<String>,
    pub lease_until: Option<i64>,
    pub last_status: Option<i64>,
    pub last_response: Option<Vec<u8>>,
    pub last_error: Option<String>,
    pub finished_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Delivery {
    /// When the next attempt is due; only a pending delivery has one.
    pub fn next_attempt(&self) -> Option<i64> {
        (self.state == DeliveryState::Pending).then_some(self.next_attempt_at)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct Attempt {
    pub delivery_id: String,
    pub attempt: i64,
    pub started_at: i64,
    pub duration_ms: i64,
    pub request_headers: String,
    pub response_status: Option<i64>,
    pub response_headers: Option<String>,
    pub response_body: Option<Vec<u8>>,
    pub error: Option<String>,
    pub classification: String,
}

#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct Notification {
    pub id: String,
    pub account_id: String,
    pub endpoint_id: Option<String>,
    pub kind: String,
    pub subject: String,
    pub body: String,
    pub created_at: i64,
    pub sent_at: Option<i64>,
    pub send_attempts: i64,
    pub next_send_at: Option<i64>,
    pub last_send_error: Option<String>,
    /// For one person only (an invitation, a reset), not the account.
    pub recipient: Option<String>,
}

/// One line of the replay audit log: who resent what, and how many.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct Replay {
    pub id: String,
    pub account_id: Option<String>,
    pub actor: String,
    pub kind: String,
    pub criteria: String,
    pub count: i64,
    pub created_at: i64,
    /// Bulk replays and recoveries: `running`, then `cancelled` if an
    /// admin stopped a bulk one; singles `done`.
    pub status: String,
    pub window_ms: Option<i64>,
}

/// What a claim took, and whether it held due work back for want of a
/// slot: an endpoint (or its host) full or being claimed elsewhere (on
/// Postgres), or every free slot of one taken. Slots freed by any
/// attempt may let that work through; work held back by a rate limit
/// waits for the next second instead and does not count. A claim that
/// took nothing says it too.
#[derive(Debug, Default)]
pub struct Claim {
    pub deliveries: Vec<Delivery>,
    pub held_back: bool,
    /// It left nothing due that a claim could start now (an ingest
    /// group's lease; `false` where unknown): no claim loop need look.
    pub drained: bool,
    pub read_along: ReadAlong,
}

/// What a claim read along with its deliveries, so its round need not
/// read it again: on Postgres each delivery's event and endpoint (two
/// statements fewer on the way of every first attempt); on SQLite, a
/// claim nothing; an ingest group's lease, the events it wrote and the
/// endpoints it leased for.
#[derive(Debug, Default)]
pub struct ReadAlong {
    /// By delivery id.
    pub events: std::collections::HashMap<String, Event>,
    /// By id, as stored (secrets sealed).
    pub endpoints: std::collections::HashMap<String, Endpoint>,
}
