//! What happens to a delivery after an attempt (SPEC §4), as a pure
//! function of the attempt's verdict, what the receiver asked for, the
//! delivery so far, the settings, the time and a random source: table
//! tests below cover each rule.

use std::time::Duration;

use rand::Rng;

use super::{classify::Verdict, retry_after, settings::DeliverySettings};
use crate::{clock::Timestamp, store::Transition};

/// The receiver's answer as far as the decision needs it.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub verdict: Verdict,
    pub status: Option<u16>,
    /// The raw `Retry-After` header, if any; only 429 and 503 honour it.
    pub retry_after: Option<&'a str>,
}

/// Where the delivery goes, and why when the decision itself ends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub transition: Transition,
    /// Set when the delivery gives up here; otherwise the attempt's own
    /// error (if any) is the reason shown.
    pub reason: Option<String>,
}

impl Decision {
    fn to(transition: Transition) -> Decision {
        Decision {
            transition,
            reason: None,
        }
    }

    fn expired(reason: String) -> Decision {
        Decision {
            transition: Transition::Expired,
            reason: Some(reason),
        }
    }
}

/// `failed_before` is the delivery's failed attempts since its last
/// (re)send; `give_up_at` its deadline.
pub fn decide(
    answer: Answer<'_>,
    failed_before: i64,
    give_up_at: Timestamp,
    settings: &DeliverySettings,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Decision {
    match answer.verdict {
        Verdict::Delivered => Decision::to(Transition::Delivered),
        Verdict::Failed | Verdict::Gone | Verdict::Blocked => Decision::to(Transition::Failed),
        Verdict::Retry | Verdict::RetryAmbiguous => {
            retry_or_expire(answer, failed_before, give_up_at, settings, now, rng)
        }
    }
}

fn retry_or_expire(
    answer: Answer<'_>,
    failed_before: i64,
    give_up_at: Timestamp,
    settings: &DeliverySettings,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Decision {
    let failed = u32::try_from(failed_before.saturating_add(1)).unwrap_or(u32::MAX);
    if failed >= settings.max_attempts {
        return Decision::expired(format!("gave up after {failed} attempts"));
    }
    let backoff = settings.backoff.delay(failed, rng);
    let asked = match answer.status {
        Some(429 | 503) => answer.retry_after.and_then(|v| retry_after::parse(v, now)),
        _ => None,
    };
    // Never sooner than the receiver asked, never sooner than the backoff.
    let delay: Duration = asked.map_or(backoff, |a| a.max(backoff));
    let next = now.plus(delay);
    if next >= give_up_at {
        return Decision::expired(match asked {
            Some(a) if a >= backoff => format!(
                "the receiver asked to wait {}s (Retry-After), past the retry window",
                a.as_secs()
            ),
            _ => "the next attempt would fall past the retry window".to_string(),
        });
    }
    Decision::to(Transition::Retry {
        next_attempt_at: next,
    })
}

#[cfg(test)]
mod tests {
    use rand::{rngs::StdRng, SeedableRng};

    use super::*;
    use crate::delivery::{
        backoff::{Backoff, Jitter},
        classify::classify,
    };

    const NOW: Timestamp = Timestamp(1_800_000_000_000);
    const MIN: u64 = 60;

    #[derive(Debug)]
    enum Expect {
        Delivered,
        Failed,
        /// Retried this many seconds from now, at the least and the most.
        RetryWithin(u64, u64),
        /// Expired, the reason containing this.
        Expired(&'static str),
    }

    struct Case {
        rule: &'static str,
        verdict: Verdict,
        status: Option<u16>,
        retry_after: Option<&'static str>,
        failed_before: i64,
        /// The deadline, in seconds from now.
        window_s: u64,
        expect: Expect,
    }

    fn case(rule: &'static str, status: Option<u16>, expect: Expect) -> Case {
        Case {
            rule,
            verdict: classify(status),
            status,
            retry_after: None,
            failed_before: 0,
            window_s: 72 * 3600,
            expect,
        }
    }

    fn check(cases: Vec<Case>, settings: &DeliverySettings) {
        for c in cases {
            let give_up = NOW.plus(Duration::from_secs(c.window_s));
            // Every bound must hold whatever the jitter draws.
            for seed in 0..50 {
                let answer = Answer {
                    verdict: c.verdict,
                    status: c.status,
                    retry_after: c.retry_after,
                };
                let mut rng = StdRng::seed_from_u64(seed);
                let d = decide(answer, c.failed_before, give_up, settings, NOW, &mut rng);
                let rule = c.rule;
                match (&c.expect, &d.transition) {
                    (Expect::Delivered, Transition::Delivered)
                    | (Expect::Failed, Transition::Failed) => {
                        assert_eq!(d.reason, None, "{rule}")
                    }
                    (Expect::RetryWithin(lo, hi), Transition::Retry { next_attempt_at }) => {
                        let wait = NOW.until(*next_attempt_at).as_secs();
                        assert!((*lo..=*hi).contains(&wait), "{rule}: {wait}s");
                        assert_eq!(d.reason, None, "{rule}");
                    }
                    (Expect::Expired(why), Transition::Expired) => {
                        let reason = d.reason.clone().unwrap_or_default();
                        assert!(reason.contains(why), "{rule}: {reason}");
                    }
                    (want, got) => panic!("{rule}: wanted {want:?}, got {got:?}"),
                }
            }
        }
    }

    #[test]
    fn every_rule_of_the_delivery_engine() {
        let with = |mut c: Case, f: &dyn Fn(&mut Case)| {
            f(&mut c);
            c
        };
        let cases = vec![
            case("2xx is delivered", Some(200), Expect::Delivered),
            case("any 2xx is delivered", Some(299), Expect::Delivered),
            case("400 fails at once", Some(400), Expect::Failed),
            case("401 fails at once", Some(401), Expect::Failed),
            case("403 fails at once", Some(403), Expect::Failed),
            case("422 fails at once", Some(422), Expect::Failed),
            case(
                "410 fails (and pauses: endpoint_health)",
                Some(410),
                Expect::Failed,
            ),
            with(
                case("a blocked address fails", None, Expect::Failed),
                &|c| c.verdict = Verdict::Blocked,
            ),
            case(
                "no answer retries after base/2..base",
                None,
                Expect::RetryWithin(MIN / 2, MIN),
            ),
            case("5xx retries", Some(500), Expect::RetryWithin(MIN / 2, MIN)),
            case("408 retries", Some(408), Expect::RetryWithin(MIN / 2, MIN)),
            case("429 retries", Some(429), Expect::RetryWithin(MIN / 2, MIN)),
            case("3xx retries", Some(302), Expect::RetryWithin(MIN / 2, MIN)),
            case(
                "other 4xx retries",
                Some(418),
                Expect::RetryWithin(MIN / 2, MIN),
            ),
            case(
                "404 retries (ambiguous)",
                Some(404),
                Expect::RetryWithin(MIN / 2, MIN),
            ),
            with(
                case(
                    "a cut-off body retries",
                    Some(200),
                    Expect::RetryWithin(MIN / 2, MIN),
                ),
                &|c| c.verdict = Verdict::Retry,
            ),
            with(
                case(
                    "the n-th failure doubles",
                    Some(500),
                    Expect::RetryWithin(4 * MIN, 8 * MIN),
                ),
                &|c| c.failed_before = 3,
            ),
            with(
                case(
                    "the backoff is capped at an hour",
                    Some(500),
                    Expect::RetryWithin(1800, 3600),
                ),
                &|c| c.failed_before = 12,
            ),
            with(
                case(
                    "Retry-After seconds on 429 are honoured",
                    Some(429),
                    Expect::RetryWithin(600, 600),
                ),
                &|c| c.retry_after = Some("600"),
            ),
            with(
                case(
                    "Retry-After on 503 too",
                    Some(503),
                    Expect::RetryWithin(600, 600),
                ),
                &|c| c.retry_after = Some("600"),
            ),
            with(
                case(
                    "Retry-After as an HTTP-date",
                    Some(503),
                    Expect::RetryWithin(7199, 7200),
                ),
                &|c| c.retry_after = Some("Fri, 15 Jan 2027 10:00:00 GMT"),
            ),
            with(
                case(
                    "a shorter Retry-After never shortens the backoff",
                    Some(429),
                    Expect::RetryWithin(MIN / 2, MIN),
                ),
                &|c| c.retry_after = Some("1"),
            ),
            with(
                case(
                    "a date in the past means no wait: the backoff still applies",
                    Some(429),
                    Expect::RetryWithin(MIN / 2, MIN),
                ),
                &|c| c.retry_after = Some("Sun, 06 Nov 1994 08:49:37 GMT"),
            ),
            with(
                case(
                    "garbage is ignored",
                    Some(429),
                    Expect::RetryWithin(MIN / 2, MIN),
                ),
                &|c| c.retry_after = Some("soon, please"),
            ),
            with(
                case(
                    "only 429 and 503 are heard",
                    Some(500),
                    Expect::RetryWithin(MIN / 2, MIN),
                ),
                &|c| c.retry_after = Some("600"),
            ),
            with(
                case(
                    "the 16th failed attempt expires",
                    Some(500),
                    Expect::Expired("gave up after 16 attempts"),
                ),
                &|c| c.failed_before = 15,
            ),
            with(
                case(
                    "a 404 expires at the limit too",
                    Some(404),
                    Expect::Expired("gave up after 16 attempts"),
                ),
                &|c| c.failed_before = 15,
            ),
            with(
                case(
                    "a backoff past the deadline expires now",
                    Some(500),
                    Expect::Expired("the next attempt would fall past the retry window"),
                ),
                &|c| c.window_s = 10,
            ),
            with(
                case(
                    "a Retry-After past the deadline expires now, never shortened",
                    Some(429),
                    Expect::Expired("asked to wait 7200s (Retry-After), past the retry window"),
                ),
                &|c| {
                    c.retry_after = Some("7200");
                    c.window_s = 3600;
                },
            ),
            with(
                case("a success needs no time left", Some(204), Expect::Delivered),
                &|c| c.window_s = 0,
            ),
        ];
        check(cases, &DeliverySettings::default());
    }

    #[test]
    fn settings_change_the_schedule() {
        let settings = DeliverySettings {
            backoff: Backoff {
                base: Duration::from_secs(10),
                cap: Duration::from_secs(40),
                jitter: Jitter::Full,
                ..Backoff::default()
            },
            max_attempts: 3,
            ..DeliverySettings::default()
        };
        let cases = vec![
            case(
                "full jitter: 0..base",
                Some(500),
                Expect::RetryWithin(0, 10),
            ),
            Case {
                failed_before: 1,
                ..case(
                    "the second failure: 0..2×base",
                    Some(500),
                    Expect::RetryWithin(0, 20),
                )
            },
            Case {
                failed_before: 2,
                ..case(
                    "max_attempts = 3",
                    Some(500),
                    Expect::Expired("gave up after 3 attempts"),
                )
            },
        ];
        check(cases, &settings);
    }
}
