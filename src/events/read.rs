//! Events as both faces show them: a page of the list, and one event with
//! every delivery and every attempt, each attempt explained.

use crate::{
    context::Ctx,
    delivery::classify::explain,
    error::{OrNotFound, Result},
    store::{AnswerFilter, Attempt, Delivery, Event, EventFilter, EventPage},
};

/// The last-answer filter as people type it: an exact status (`404`), a
/// class (`4xx`, `5xx`) or `timeout`. The error says what is accepted.
pub fn parse_answer(raw: &str) -> std::result::Result<AnswerFilter, String> {
    let t = raw.trim().to_ascii_lowercase();
    // Exactly `Nxx` or three digits: no signs, no leading zeros to spare.
    let digits = |d: &str, n: usize| d.len() == n && d.bytes().all(|b| b.is_ascii_digit());
    let class = t
        .strip_suffix("xx")
        .filter(|d| digits(d, 1))
        .and_then(|d| d.parse::<u8>().ok())
        .filter(|d| (1..=5).contains(d));
    let code = Some(t.as_str())
        .filter(|d| digits(d, 3))
        .and_then(|d| d.parse::<u16>().ok())
        .ok_or(());
    match (t.as_str(), class, code) {
        ("timeout", _, _) => Ok(AnswerFilter::Timeout),
        (_, Some(c), _) => Ok(AnswerFilter::Class(c)),
        (_, None, Ok(code)) if (100..=599).contains(&code) => Ok(AnswerFilter::Status(code)),
        _ => Err(format!(
            "last answer {raw:?} is not a status (100 to 599), a class (4xx, 5xx) or \"timeout\""
        )),
    }
}

/// The words `parse_answer` reads back, for links and forms.
pub fn answer_text(a: AnswerFilter) -> String {
    match a {
        AnswerFilter::Status(code) => code.to_string(),
        AnswerFilter::Class(c) => format!("{c}xx"),
        AnswerFilter::Timeout => "timeout".into(),
    }
}

/// A page's place in the list, for `next_cursor` and page links: opaque to
/// callers, written as `<created_at ms>.<event id>`.
pub fn cursor((at, id): &(i64, String)) -> String {
    format!("{at}.{id}")
}

/// The place a `cursor` names; `None` for anything this code did not write.
pub fn parse_cursor(raw: &str) -> Option<(i64, String)> {
    raw.split_once('.')
        .and_then(|(at, id)| Some((at.parse().ok()?, id.to_string())))
}

/// One attempt as a customer reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptInfo {
    pub number: i64,
    pub started_at: i64,
    pub duration_ms: i64,
    pub status: Option<i64>,
    pub classification: String,
    /// What happened and why Dakghar acts as it does, in a line.
    pub explanation: String,
    /// The first bytes of the response body, as text.
    pub response_snippet: Option<String>,
    pub error: Option<String>,
    pub request_headers: Vec<(String, String)>,
    pub response_headers: Vec<(String, String)>,
}

impl From<Attempt> for AttemptInfo {
    fn from(a: Attempt) -> Self {
        let status = a.response_status.and_then(|s| u16::try_from(s).ok());
        AttemptInfo {
            explanation: explain(status, &a.classification),
            request_headers: headers(Some(&a.request_headers)),
            response_headers: headers(a.response_headers.as_deref()),
            number: a.attempt,
            started_at: a.started_at,
            duration_ms: a.duration_ms,
            status: a.response_status,
            classification: a.classification,
            response_snippet: a
                .response_body
                .map(|b| String::from_utf8_lossy(&b).into_owned()),
            error: a.error,
        }
    }
}

fn headers(stored: Option<&str>) -> Vec<(String, String)> {
    stored
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

/// A delivery with its attempts, oldest first.
#[derive(Debug, Clone)]
pub struct DeliveryInfo {
    pub delivery: Delivery,
    pub attempts: Vec<AttemptInfo>,
}

#[derive(Debug, Clone)]
pub struct EventInfo {
    pub event: Event,
    /// In the order they were created.
    pub deliveries: Vec<DeliveryInfo>,
}

/// A page of the account's events, newest first, each with its deliveries.
pub async fn list(
    ctx: &Ctx,
    account_id: &str,
    filter: &EventFilter,
    limit: i64,
) -> Result<EventPage> {
    Ok(ctx.store.list_events(account_id, filter, limit).await?)
}

/// The event types the account has sent, in order, at most `limit`.
pub async fn types(ctx: &Ctx, account_id: &str, limit: i64) -> Result<Vec<String>> {
    Ok(ctx.store.event_types(account_id, limit).await?)
}

/// One event of the account with every delivery and attempt; another
/// account's event is not found.
pub async fn detail(ctx: &Ctx, account_id: &str, id: &str) -> Result<EventInfo> {
    let store = &ctx.store;
    let event = store.event(account_id, id).await.or_not_found("event")?;
    let mut deliveries = Vec::new();
    for delivery in store.deliveries_of_event(account_id, id).await? {
        let attempts = store.attempts_of_delivery(&delivery.id).await?;
        deliveries.push(DeliveryInfo {
            delivery,
            attempts: attempts.into_iter().map(AttemptInfo::from).collect(),
        });
    }
    Ok(EventInfo { event, deliveries })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_as_people_type_them() {
        let table: &[(&str, Option<AnswerFilter>)] = &[
            ("404", Some(AnswerFilter::Status(404))),
            (" 429 ", Some(AnswerFilter::Status(429))),
            ("4xx", Some(AnswerFilter::Class(4))),
            ("5XX", Some(AnswerFilter::Class(5))),
            ("Timeout", Some(AnswerFilter::Timeout)),
            ("600", None),
            ("99", None),
            ("6xx", None),
            ("xx", None),
            ("4x", None),
            ("", None),
            ("-1", None),
            ("timed out", None),
            ("+404", None),
            ("0404", None),
            ("04xx", None),
        ];
        for (raw, want) in table {
            assert_eq!(parse_answer(raw).ok(), *want, "{raw:?}");
        }
        for a in [
            AnswerFilter::Status(503),
            AnswerFilter::Class(4),
            AnswerFilter::Timeout,
        ] {
            assert_eq!(parse_answer(&answer_text(a)), Ok(a));
        }
    }
}
