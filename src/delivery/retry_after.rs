//! `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
//! Anything else is ignored; nothing here can panic or overflow.

use std::time::{Duration, UNIX_EPOCH};

use crate::clock::Timestamp;

/// How long the receiver asked us to wait, measured from `now`.
/// A date in the past means zero. Garbage, negatives, fractions and values
/// that do not fit are `None` (the header is ignored).
pub fn parse(value: &str, now: Timestamp) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().ok().map(Duration::from_secs);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    let date_ms = date
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_millis()).ok())?;
    Some(now.until(Timestamp(date_ms)))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Sun, 06 Nov 1994 08:49:37 GMT, the RFC's own example.
    const RFC_EXAMPLE: Timestamp = Timestamp(784_111_777_000);

    #[test]
    fn seconds_and_garbage() {
        let now = RFC_EXAMPLE;
        let table: &[(&str, Option<u64>)] = &[
            ("120", Some(120)),
            ("0", Some(0)),
            (" 30 ", Some(30)),
            ("99999999999999", Some(99_999_999_999_999)),
            ("-5", None),
            ("1.5", None),
            ("1e18", None),
            ("NaN", None),
            ("abc", None),
            ("", None),
            ("   ", None),
            ("99999999999999999999999", None),
            ("+5", None),
            ("12 34", None),
        ];
        for (value, expected) in table {
            assert_eq!(
                parse(value, now),
                expected.map(Duration::from_secs),
                "{value:?}"
            );
        }
    }

    #[test]
    fn all_three_date_formats() {
        let now = RFC_EXAMPLE.minus(Duration::from_secs(90));
        for value in [
            "Sun, 06 Nov 1994 08:49:37 GMT",  // IMF-fixdate
            "Sunday, 06-Nov-94 08:49:37 GMT", // RFC 850
            "Sun Nov  6 08:49:37 1994",       // asctime
        ] {
            assert_eq!(parse(value, now), Some(Duration::from_secs(90)), "{value}");
        }
    }

    #[test]
    fn a_past_date_means_no_wait_and_a_far_date_a_long_one() {
        let later = RFC_EXAMPLE.plus(Duration::from_secs(3600));
        assert_eq!(
            parse("Sun, 06 Nov 1994 08:49:37 GMT", later),
            Some(Duration::ZERO)
        );
        let far = parse("Fri, 31 Dec 9999 23:59:59 GMT", RFC_EXAMPLE).unwrap();
        assert!(far > Duration::from_secs(72 * 3600));
        assert_eq!(parse("Sun, 32 Nov 1994 08:49:37 GMT", RFC_EXAMPLE), None);
    }

    proptest::proptest! {
        #[test]
        fn fuzz_retry_after_never_panics_and_reads_what_it_can(value in "\\PC{0,40}", now in 0i64..=i64::MAX / 2) {
            let parsed = parse(&value, Timestamp(now));
            let trimmed = value.trim();
            if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
                proptest::prop_assert_eq!(parsed, trimmed.parse::<u64>().ok().map(Duration::from_secs));
            }
        }

        #[test]
        fn fuzz_retry_after_seconds_and_dates_round_trip(secs in 0u64..=u64::MAX, ahead in 0u64..10_000_000) {
            proptest::prop_assert_eq!(parse(&secs.to_string(), RFC_EXAMPLE), Some(Duration::from_secs(secs)));
            let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(RFC_EXAMPLE.millis() as u64) + Duration::from_secs(ahead));
            proptest::prop_assert_eq!(parse(&date, RFC_EXAMPLE), Some(Duration::from_secs(ahead)));
        }
    }
}
