//! What one attempt's result means for the delivery (SPEC §4).

use std::sync::LazyLock;

use super::retry_statuses::RetryStatuses;

/// The verdict on one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Any 2xx.
    Delivered,
    /// Network errors, 5xx, 408, 429, 3xx and unlisted 4xx: try again later.
    Retry,
    /// 404: retried, but it also counts toward the endpoint's failure streak,
    /// since a receiver that lost its route looks exactly like this.
    RetryAmbiguous,
    /// 400, 401, 403, 422: the receiver refused this message; retrying won't help.
    Failed,
    /// 410: the receiver says the endpoint is gone; fail and pause the endpoint.
    Gone,
    /// The SSRF guard refused the address; no request was made. Retrying
    /// cannot help until the endpoint or the settings change.
    Blocked,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Delivered => "delivered",
            Verdict::Retry => "transient",
            Verdict::RetryAmbiguous => "ambiguous",
            Verdict::Failed => "permanent",
            Verdict::Gone => "gone",
            Verdict::Blocked => "blocked",
        }
    }

    pub fn is_retry(self) -> bool {
        matches!(self, Verdict::Retry | Verdict::RetryAmbiguous)
    }

    /// Counts toward the permanent-failure streak that pauses dead endpoints.
    pub fn is_permanent_failure(self) -> bool {
        matches!(
            self,
            Verdict::Failed | Verdict::Gone | Verdict::RetryAmbiguous | Verdict::Blocked
        )
    }
}

/// `None` is a request that got no HTTP answer (timeout, refused, DNS,
/// TLS). With the default retry list (SPEC §4's table).
pub fn classify(status: Option<u16>) -> Verdict {
    static DEFAULT: LazyLock<RetryStatuses> = LazyLock::new(RetryStatuses::default);
    classify_with(status, &DEFAULT)
}

/// With the retry list in force: a listed status is retried (a 404 as
/// ambiguous), any other non-2xx fails; 410 is `Gone` unless listed.
pub fn classify_with(status: Option<u16>, retried: &RetryStatuses) -> Verdict {
    match status {
        None => Verdict::Retry,
        Some(200..=299) => Verdict::Delivered,
        Some(404) if retried.contains(404) => Verdict::RetryAmbiguous,
        Some(s) if retried.contains(s) => Verdict::Retry,
        Some(410) => Verdict::Gone,
        Some(_) => Verdict::Failed,
    }
}

impl Verdict {
    /// The verdict an attempt was stored with, from its text.
    pub fn parse_stored(text: &str) -> Option<Verdict> {
        [
            Verdict::Delivered,
            Verdict::Retry,
            Verdict::RetryAmbiguous,
            Verdict::Failed,
            Verdict::Gone,
            Verdict::Blocked,
        ]
        .into_iter()
        .find(|v| v.as_str() == text)
    }
}

/// One line a customer can read next to the attempt: what happened and why
/// Dakghar acts as it does.
pub fn explain(status: Option<u16>, classification: &str) -> String {
    if classification == Verdict::Blocked.as_str() {
        return "Blocked: the endpoint's address is internal (loopback, private or metadata), so nothing was sent — permanent until the URL changes or an admin allows the subnet".into();
    }
    let delivered = classify(status) == Verdict::Delivered;
    if delivered && classification == Verdict::Retry.as_str() {
        let code = status.unwrap_or_default();
        return format!("{code}, but the response body did not finish within the request timeout — transient: retried with backoff");
    }
    let Some(code) = status else {
        return "No HTTP response (timeout, refused connection, DNS or TLS error) — transient: retried with backoff".into();
    };
    // As it was judged then: the retry list may differ per endpoint and
    // over time.
    let verdict = Verdict::parse_stored(classification)
        .filter(|_| !delivered)
        .unwrap_or_else(|| classify(status));
    let reason = http::StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let why = match verdict {
        Verdict::Delivered => "delivered: the endpoint accepted the event",
        Verdict::Gone => "permanent: the endpoint says it no longer exists; not retried and the endpoint is paused",
        Verdict::Failed => "permanent: the endpoint rejected this event; not retried",
        Verdict::RetryAmbiguous => "ambiguous: retried, and counted toward the endpoint's failure streak",
        Verdict::Retry if code == 429 => "transient: the endpoint asked us to slow down; retried, honouring Retry-After",
        Verdict::Retry if code == 503 => "transient: the endpoint is unavailable; retried, honouring Retry-After",
        Verdict::Retry if (300..400).contains(&code) => "redirects are not followed; retried with backoff",
        Verdict::Retry => "transient: retried with backoff",
        Verdict::Blocked => "blocked: nothing was sent",
    };
    format!("{code} {reason} — {why}").replace("  —", " —")
}

#[cfg(test)]
mod tests {
    use super::{classify, classify_with, explain, Verdict::*};

    #[test]
    fn every_class_of_answer() {
        let table = [
            (None, Retry),
            (Some(200), Delivered),
            (Some(201), Delivered),
            (Some(204), Delivered),
            (Some(299), Delivered),
            (Some(301), Retry),
            (Some(302), Retry),
            (Some(308), Retry),
            (Some(400), Failed),
            (Some(401), Failed),
            (Some(403), Failed),
            (Some(404), RetryAmbiguous),
            (Some(405), Retry),
            (Some(408), Retry),
            (Some(409), Retry),
            (Some(410), Gone),
            (Some(413), Retry),
            (Some(422), Failed),
            (Some(429), Retry),
            (Some(500), Retry),
            (Some(502), Retry),
            (Some(503), Retry),
            (Some(504), Retry),
            (Some(599), Retry),
            (Some(100), Retry),
        ];
        for (status, verdict) in table {
            assert_eq!(classify(status), verdict, "{status:?}");
        }
    }

    #[test]
    fn a_custom_list_decides_what_is_retried() {
        let list = "408,429,5xx".parse().unwrap();
        let table = [
            (None, Retry),
            (Some(200), Delivered),
            (Some(404), Failed),
            (Some(409), Failed),
            (Some(410), Gone),
            (Some(408), Retry),
            (Some(429), Retry),
            (Some(503), Retry),
            (Some(301), Failed),
        ];
        for (status, verdict) in table {
            assert_eq!(classify_with(status, &list), verdict, "{status:?}");
        }
        let with_gone = "404,410".parse().unwrap();
        assert_eq!(classify_with(Some(410), &with_gone), Retry);
        assert_eq!(classify_with(Some(404), &with_gone), RetryAmbiguous);
    }

    #[test]
    fn streaks_and_retries() {
        assert!(RetryAmbiguous.is_retry() && RetryAmbiguous.is_permanent_failure());
        assert!(Gone.is_permanent_failure() && !Gone.is_retry());
        assert!(!Retry.is_permanent_failure());
    }

    #[test]
    fn explanations_read_well() {
        assert_eq!(
            explain(Some(410), ""),
            "410 Gone — permanent: the endpoint says it no longer exists; not retried and the endpoint is paused"
        );
        assert!(explain(Some(429), "").starts_with("429 Too Many Requests — transient"));
        assert!(explain(None, "").starts_with("No HTTP response"));
        assert!(
            explain(Some(500), "permanent").contains("not retried"),
            "a 500 outside this endpoint's retry list"
        );
        assert!(explain(Some(400), "transient").contains("retried with backoff"));
    }
}
