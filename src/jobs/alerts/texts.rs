//! Every email's words, in one place: the alerts the customer reads in the
//! dashboard's notifications and by email (per endpoint, never per event,
//! SPEC §6), and the personal emails of the team (an invitation, a
//! password reset).

use crate::{
    clock::Timestamp,
    store::{FailingDetails, Store, StoreError},
};

/// One alert: its kind (for filtering) and the email it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    pub kind: &'static str,
    pub subject: String,
    pub body: String,
}

impl Alert {
    /// Writes it to the account's outbox (the mailer sends it from there).
    pub async fn write(
        &self,
        store: &Store,
        account_id: &str,
        endpoint_id: Option<&str>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        store
            .add_notification(
                account_id,
                endpoint_id,
                self.kind,
                &self.subject,
                &self.body,
                now,
            )
            .await?;
        Ok(())
    }

    /// Writes it to the outbox for `recipient` alone.
    pub async fn write_to(
        &self,
        store: &Store,
        account_id: &str,
        recipient: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        store
            .add_personal_email(
                account_id,
                recipient,
                self.kind,
                &self.subject,
                &self.body,
                now,
            )
            .await?;
        Ok(())
    }
}

/// No success for an hour, or a day, since `failing_since`.
/// The endpoint at `links` (its page, its failed events) has failed for
/// `hours` and still does, as `details` say (chapter 003's email: what
/// fails, since when, what the receiver answered, what is at stake, where
/// to look).
pub fn failing(
    url: &str,
    hours: i64,
    failing_since: Option<i64>,
    details: &FailingDetails,
    links: &EndpointLinks,
    now: Timestamp,
) -> Alert {
    let span = if hours >= 24 { "a day" } else { "an hour" };
    let answer = match (details.last_status, details.last_error.as_deref()) {
        (Some(status), Some(error)) => format!("HTTP {status} ({error})"),
        (Some(status), None) => format!("HTTP {status}"),
        (None, Some(error)) => format!("no HTTP answer ({error})"),
        (None, None) => "no HTTP answer".to_string(),
    };
    let at_stake = match details.oldest_give_up_at {
        Some(at) => {
            let hours_left = (at - now.millis()).max(0) / 3_600_000;
            format!(
                "The oldest waiting delivery gives up in about {hours_left} hours ({}) unless the receiver recovers.",
                Timestamp(at).to_rfc3339()
            )
        }
        None => {
            "No delivery is waiting right now; new events will be retried the same way.".to_string()
        }
    };
    let events = if details.last_events.is_empty() {
        String::new()
    } else {
        format!(
            " The latest events that failed: {}.",
            details.last_events.join(", ")
        )
    };
    Alert {
        kind: "failing",
        subject: format!("{url} has been failing for {span}"),
        body: format!(
            "Deliveries to {url} have not succeeded since {}, and are still failing: the last answer was {answer}. \
             We keep retrying with backoff until each delivery's retry window ends. {at_stake}{events}\n\n\
             The endpoint: {}\nIts failed events: {}",
            failing_since.map(|t| Timestamp(t).to_rfc3339()).unwrap_or_default(),
            links.endpoint,
            links.failed_events,
        ),
    }
}

/// Where an alert about one endpoint points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointLinks {
    pub endpoint: String,
    pub failed_events: String,
}

impl EndpointLinks {
    /// Under `base`, this installation's public URL.
    pub fn new(base: &str, endpoint_id: &str) -> EndpointLinks {
        EndpointLinks {
            endpoint: format!("{base}/endpoints/{endpoint_id}"),
            failed_events: format!("{base}/events?state=failed&endpoint={endpoint_id}"),
        }
    }
}

/// The oldest of `waiting` deliveries gives up at `oldest_give_up_at`.
pub fn expiry_warning(url: &str, waiting: i64, oldest_give_up_at: i64, now: Timestamp) -> Alert {
    let minutes = (oldest_give_up_at - now.millis()).max(0) / 60_000;
    Alert {
        kind: "expiry_warning",
        subject: format!("Deliveries to {url} are about to expire"),
        body: format!(
            "The oldest of the {waiting} deliveries waiting for {url} gives up in about {minutes} minutes \
             ({}). Fix the receiver or resume the endpoint now, or resend them from the \
             dashboard after they expire.",
            Timestamp(oldest_give_up_at).to_rfc3339()
        ),
    }
}

/// A wave of `expired` expirations is over; `last_ids` are the latest,
/// `last_status` the last answer.
pub fn expired_summary(
    url: &str,
    expired: i64,
    last_ids: &[&str],
    last_status: Option<i64>,
) -> Alert {
    let status = last_status.map_or_else(|| "no response".to_string(), |s| format!("HTTP {s}"));
    Alert {
        kind: "expired_summary",
        subject: format!("{expired} deliveries to {url} expired"),
        body: format!(
            "{expired} deliveries to {url} expired without being delivered. The last ones: {}. \
             The last answer was {status}. They are in the dead-letter queue: resend them \
             from the dashboard once the receiver works.",
            last_ids.join(", ")
        ),
    }
}

/// The engine paused the endpoint as dead, because `reason`.
pub fn endpoint_paused(url: &str, reason: &str) -> Alert {
    Alert {
        kind: "endpoint_paused",
        subject: format!("Endpoint paused: {url}"),
        body: format!(
            "We paused deliveries to {url} because {reason}. New events keep queueing; \
             resume the endpoint once the receiver is fixed and the queue drains."
        ),
    }
}

/// An admin's bulk replay resets `count` of the account's deliveries,
/// spread over `spread` (in words, such as "5m"), from `starts_at` when
/// it is announced ahead (a large replay), else from now.
pub fn redelivering(count: i64, spread: &str, starts_at: Option<Timestamp>) -> Alert {
    let (subject, when) = match starts_at {
        Some(at) => (
            format!(
                "We will redeliver {count} events from {}, expect a spike",
                at.to_rfc3339()
            ),
            format!("from {}, ", at.to_rfc3339()),
        ),
        None => (
            format!("We are redelivering {count} events, expect a spike"),
            String::new(),
        ),
    };
    Alert {
        kind: "replay",
        subject,
        body: format!(
            "An administrator is redelivering {count} of your deliveries {when}\
             spread over {spread} and within each endpoint's rate limit. Expect more traffic \
             than usual at your endpoints meanwhile; each delivery keeps its webhook-id, so \
             receivers that drop duplicates are safe."
        ),
    }
}

/// An invitation to join `account` as `role`, through `link`.
pub fn invitation(brand: &str, account: &str, role: &str, link: &str, expires_at: i64) -> Alert {
    Alert {
        kind: "invitation",
        subject: format!("You are invited to {account} on {brand}"),
        body: format!(
            "You are invited to join {account} as {role}, to follow its webhooks.\n\n\
             Choose a password here to accept: {link}\n\n\
             The link works once, until {}. If you did not expect this, ignore it.",
            Timestamp(expires_at).to_rfc3339()
        ),
    }
}

/// A link to choose a new password.
pub fn password_reset(brand: &str, link: &str, expires_at: i64) -> Alert {
    Alert {
        kind: "password_reset",
        subject: format!("Reset your {brand} password"),
        body: format!(
            "Someone asked to reset the password of this account.\n\n\
             Choose a new one here: {link}\n\n\
             The link works once, until {}; using it signs out every other \
             session. If it was not you, ignore this email: your password stays.",
            Timestamp(expires_at).to_rfc3339()
        ),
    }
}
