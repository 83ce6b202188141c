//! One signed POST to a receiver, and what came back.

use std::time::{Duration, Instant};

use reqwest::{header, redirect, Client};

use super::{settings::DeliverySettings, signing, target_policy::Blocked};
use crate::clock::Timestamp;

pub const USER_AGENT: &str = concat!("Dakghar-Webhooks/", env!("CARGO_PKG_VERSION"));

pub fn client(settings: &DeliverySettings) -> reqwest::Result<Client> {
    let builder = Client::builder()
        .user_agent(USER_AGENT)
        .connect_timeout(settings.connect_timeout)
        .timeout(settings.request_timeout)
        // A redirect is the receiver's answer, recorded and retried, never followed.
        .redirect(redirect::Policy::none())
        // reqwest would read HTTP_PROXY and its kin: a proxy resolves the
        // target's name itself, past the guarded resolver, so an
        // environment proxy would open the SSRF guard. Only an explicit
        // --egress-proxy is used.
        .no_proxy();
    match &settings.egress_proxy {
        // The proxy's own address may well be internal: the guard checks
        // each target before the request instead (`send`).
        Some(proxy) => builder.proxy(reqwest::Proxy::all(proxy.as_str())?),
        None => builder.dns_resolver(settings.targets.resolver()),
    }
    .build()
}

#[derive(Debug)]
pub struct Sent {
    /// The URL's host, for the log line (empty if the URL does not parse).
    pub host: String,
    pub request_headers: Vec<(String, String)>,
    pub status: Option<u16>,
    pub response_headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub error: Option<String>,
    pub retry_after: Option<String>,
    pub duration: Duration,
    /// The SSRF guard refused the address: nothing reached the network.
    pub blocked: bool,
    /// The status arrived but the body did not finish (too slow, or the
    /// connection broke): the receiver may not have taken the event.
    pub incomplete: bool,
    /// No answer in time (connect, request or body timeout).
    pub timed_out: bool,
}

pub struct Outgoing<'a> {
    pub url: &'a str,
    pub event_id: &'a str,
    pub body: &'a [u8],
    pub secrets: Vec<&'a str>,
    pub now: Timestamp,
}

/// Signs and sends; never fails itself: every problem becomes part of `Sent`.
pub async fn send(
    client: &Client,
    out: Outgoing<'_>,
    settings: &DeliverySettings,
) -> Result<Sent, signing::SigningError> {
    let timestamp = out.now.unix_seconds();
    let signature = signing::signature_header(&out.secrets, out.event_id, timestamp, out.body)?;
    let request_headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("user-agent".to_string(), USER_AGENT.to_string()),
        ("webhook-id".to_string(), out.event_id.to_string()),
        ("webhook-timestamp".to_string(), timestamp.to_string()),
        ("webhook-signature".to_string(), signature.clone()),
    ];
    // Parsed once: handed to the client as it is, so the URL is not parsed
    // again per attempt (three parses were ~5 % of the server's CPU in a
    // burn-down).
    let parsed = url::Url::parse(out.url).ok();
    let mut sent = Sent {
        host: parsed
            .as_ref()
            .and_then(url::Url::host_str)
            .unwrap_or_default()
            .to_string(),
        request_headers,
        status: None,
        response_headers: Vec::new(),
        body: Vec::new(),
        error: None,
        retry_after: None,
        duration: Duration::ZERO,
        blocked: false,
        incomplete: false,
        timed_out: false,
    };
    // Names are checked by the client's resolver; literal addresses never
    // reach it, so they are checked here. Through a proxy the client
    // resolves nothing, so names are resolved and checked here too.
    let host = parsed.as_ref().and_then(url::Url::host);
    let checked = match (&host, &settings.egress_proxy) {
        (Some(url::Host::Domain(_)), None) | (None, _) => Ok(()),
        (Some(url::Host::Domain(_)), Some(_)) => match &parsed {
            Some(url) => settings.targets.check_url(url).await,
            None => Ok(()),
        },
        (Some(literal), _) => settings.targets.check_host(literal),
    };
    if let Err(blocked) = checked {
        sent.error = Some(blocked.to_string());
        sent.blocked = true;
        return Ok(sent);
    }
    let started = Instant::now();
    let request = match parsed {
        Some(url) => client.post(url),
        // The client's own error for it is recorded below.
        None => client.post(out.url),
    };
    let result = request
        .header(header::CONTENT_TYPE, "application/json")
        .header("webhook-id", out.event_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(out.body.to_vec())
        .send()
        .await;
    match result {
        Ok(mut res) => {
            sent.status = Some(res.status().as_u16());
            sent.retry_after = res
                .headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            sent.response_headers = kept_headers(res.headers());
            // Read no more than the cap, keep the first bytes, drop the rest.
            // Bodies arrive as sent (the client has no decompression), so a
            // gzip bomb is only as large as its compressed bytes up to the cap.
            let mut read = 0usize;
            loop {
                match res.chunk().await {
                    Ok(Some(chunk)) => {
                        read += chunk.len();
                        let room = settings.response_keep.saturating_sub(sent.body.len());
                        sent.body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                        if read >= settings.response_read_cap {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        sent.error = Some(format!("reading the response failed: {}", describe(&e)));
                        sent.incomplete = true;
                        sent.timed_out = e.is_timeout();
                        break;
                    }
                }
            }
        }
        Err(e) => match blocked_by_guard(&e) {
            Some(blocked) => {
                sent.error = Some(blocked.to_string());
                sent.blocked = true;
            }
            None => {
                sent.error = Some(describe(&e));
                sent.timed_out = e.is_timeout();
            }
        },
    }
    sent.duration = started.elapsed();
    Ok(sent)
}

/// Response headers kept per attempt, in all and one value at most: a
/// receiver may send a hundred headers of kilobytes each, and every
/// attempt keeps what it got.
const HEADERS_KEEP_BYTES: usize = 16 * 1024;
const HEADERS_KEEP_COUNT: usize = 64;
const HEADER_VALUE_KEEP_BYTES: usize = 1024;
/// The name of the line that says what was not kept: no header may be
/// called this (parentheses are not allowed in header names).
pub const HEADERS_TRUNCATED: &str = "(truncated)";

/// The response's headers as kept: long values cut, and at most
/// `HEADERS_KEEP_COUNT` headers or `HEADERS_KEEP_BYTES` in all, with a last
/// line that says how many more there were.
fn kept_headers(headers: &header::HeaderMap) -> Vec<(String, String)> {
    let mut kept = Vec::new();
    let (mut used, mut dropped, mut dropped_bytes) = (0usize, 0usize, 0usize);
    for (name, value) in headers {
        let raw = value.as_bytes();
        let size = name.as_str().len() + raw.len();
        let mut text =
            String::from_utf8_lossy(&raw[..raw.len().min(HEADER_VALUE_KEEP_BYTES)]).into_owned();
        if raw.len() > HEADER_VALUE_KEEP_BYTES {
            text.push_str(&format!("… ({} bytes)", raw.len()));
        }
        let cost = name.as_str().len() + text.len();
        if kept.len() >= HEADERS_KEEP_COUNT || used + cost > HEADERS_KEEP_BYTES {
            dropped += 1;
            dropped_bytes += size;
            continue;
        }
        used += cost;
        kept.push((name.to_string(), text));
    }
    if dropped > 0 {
        kept.push((
            HEADERS_TRUNCATED.to_string(),
            format!("{dropped} more headers ({dropped_bytes} bytes) not kept"),
        ));
    }
    kept
}

fn blocked_by_guard(e: &reqwest::Error) -> Option<Blocked> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(blocked) = s.downcast_ref::<Blocked>() {
            return Some(blocked.clone());
        }
        source = s.source();
    }
    None
}

/// A short reason without the URL (which may carry tokens in its query).
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_body() || e.is_decode() {
        "response body error"
    } else if e.is_request() {
        "request error"
    } else {
        "error"
    };
    let mut cause = String::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        cause = s.to_string();
        source = s.source();
    }
    if cause.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {cause}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(n: usize, value_len: usize) -> header::HeaderMap {
        let mut h = header::HeaderMap::new();
        for i in 0..n {
            h.insert(
                header::HeaderName::from_bytes(format!("x-h{i:03}").as_bytes()).unwrap(),
                header::HeaderValue::from_str(&"v".repeat(value_len)).unwrap(),
            );
        }
        h
    }

    #[test]
    fn ordinary_headers_are_kept_whole() {
        let kept = kept_headers(&headers(10, 100));
        assert_eq!(kept.len(), 10);
        assert!(kept.iter().all(|(_, v)| v.len() == 100));
    }

    #[test]
    fn a_hundred_headers_of_four_kib_keep_sixteen_kib_and_say_so() {
        let kept = kept_headers(&headers(100, 4096));
        let bytes: usize = kept.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert!(bytes <= HEADERS_KEEP_BYTES + 100, "{bytes}");
        let (name, said) = kept.last().unwrap();
        assert_eq!(name, HEADERS_TRUNCATED);
        let more = 100 - (kept.len() - 1);
        assert!(said.starts_with(&format!("{more} more headers")), "{said}");
        // Each kept value was cut, and says how long it was.
        assert!(kept[0].1.ends_with("… (4096 bytes)"), "{}", kept[0].1);
    }

    #[test]
    fn many_small_headers_stop_at_the_count() {
        let kept = kept_headers(&headers(90, 10));
        assert_eq!(kept.len(), HEADERS_KEEP_COUNT + 1);
        assert_eq!(
            kept.last().unwrap().1,
            "26 more headers (416 bytes) not kept"
        );
    }
}
