//! What a valid endpoint is: its event-type filter, its limits, and a URL
//! the SSRF guard lets through. Each refusal names the rule it broke.

use super::endpoint_url::EndpointUrl;
use crate::{
    delivery::{backoff::Strategy, retry_statuses::RetryStatuses, target_policy::TargetPolicy},
    error::{Error, Result},
};

const MAX_EVENT_TYPES: usize = 100;
/// `max_in_flight` when the customer leaves it out (SPEC §2).
pub const DEFAULT_MAX_IN_FLIGHT: i64 = 10;

pub fn check_types(types: &[String]) -> Result<()> {
    if types.len() > MAX_EVENT_TYPES {
        return Err(Error::invalid(
            "invalid_event_types",
            format!("at most {MAX_EVENT_TYPES} event types"),
        ));
    }
    if types
        .iter()
        .any(|t| t.trim().is_empty() || t.chars().count() > 255)
    {
        return Err(Error::invalid(
            "invalid_event_types",
            "event types must be 1 to 255 characters",
        ));
    }
    Ok(())
}

/// The highest rate limit an endpoint or the default may have.
pub const MAX_RATE_LIMIT: i64 = 10_000;
/// A stored `rate_limit_per_sec` of 0: the endpoint chose no limit, where
/// none (NULL) means the installation's default applies.
pub const UNLIMITED: i64 = 0;

pub fn check_limits(rate: Option<i64>, in_flight: Option<i64>) -> Result<()> {
    if rate.is_some_and(|r| r != UNLIMITED && !(1..=MAX_RATE_LIMIT).contains(&r)) {
        return Err(Error::invalid(
            "invalid_rate_limit",
            format!("rate_limit_per_sec must be between 1 and {MAX_RATE_LIMIT}, or \"unlimited\""),
        ));
    }
    if in_flight.is_some_and(|m| !(1..=1000).contains(&m)) {
        return Err(Error::invalid(
            "invalid_max_in_flight",
            "max_in_flight must be between 1 and 1000",
        ));
    }
    Ok(())
}

/// An endpoint's own retry policy, checked, with the status list in its
/// shortest form.
pub fn checked_retry_policy(
    strategy: Option<&str>,
    statuses: Option<&str>,
) -> Result<(Option<String>, Option<String>)> {
    let strategy = strategy
        .map(|s| {
            Strategy::parse(s)
                .map(|s| s.as_str().to_string())
                .ok_or_else(|| {
                    Error::invalid(
                        "invalid_retry_strategy",
                        format!("retry_strategy {s:?}: one of exponential, linear, fixed"),
                    )
                })
        })
        .transpose()?;
    let statuses = statuses
        .map(|raw| {
            raw.parse::<RetryStatuses>()
                .map(|list| list.to_string())
                .map_err(|m| {
                    Error::invalid("invalid_retry_statuses", format!("retry_statuses: {m}"))
                })
        })
        .transpose()?;
    Ok((strategy, statuses))
}

/// A valid endpoint URL that the SSRF guard lets through (its host, and
/// the addresses its name has now; sends check again).
pub async fn checked_url(raw: &str, targets: &TargetPolicy) -> Result<String> {
    let parsed = EndpointUrl::parse(raw).map_err(|m| Error::invalid("invalid_url", m))?;
    let url = url::Url::parse(parsed.as_str())
        .map_err(|e| Error::invalid("invalid_url", e.to_string()))?;
    targets
        .check_url(&url)
        .await
        .map_err(|b| Error::invalid("blocked_url", format!("url is not allowed: {b}")))?;
    Ok(parsed.as_str().to_string())
}
