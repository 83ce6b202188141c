//! Configuration of `dakghar serve`, validated once at start-up.

use std::{net::SocketAddr, path::PathBuf};

use crate::{
    delivery::{settings::DeliverySettings, target_policy::TargetPolicy},
    jobs::{mailer::MailSettings, retention::RetentionSettings},
};

/// Everything the running server needs to know about its surroundings.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// Serve `/metrics` here instead of on `listen` (a port only the
    /// scraper reaches); `None` keeps it beside the API.
    pub metrics_listen: Option<SocketAddr>,
    /// An OTLP/HTTP collector to export trace spans to; none: no traces.
    pub otlp_endpoint: Option<url::Url>,
    /// A folder to serve the stylesheet, JS and wasm (`pkg/`) and
    /// `public/` from, instead of the copy inside the binary.
    pub site_root: Option<PathBuf>,
    /// Set the cookie's `Secure` flag: the dashboard is reached over https.
    pub secure_cookies: bool,
    pub delivery: DeliverySettings,
    /// Run the embedded delivery workers (tests drive the engine by hand).
    pub run_workers: bool,
    /// Serve the dashboard and the REST API; a worker-only node answers
    /// just `/healthz` and `/metrics`.
    pub serve_api: bool,
    /// Resends per endpoint per minute, API and dashboard together (SPEC §5).
    pub resends_per_minute: i64,
    /// Endpoints one account may have (`--max-endpoints-per-account`); an
    /// event fans out to at most this many.
    pub max_endpoints_per_account: i64,
    /// Events per second one account may send to this node
    /// (`--ingest-rate-limit`); `None` is unlimited.
    pub ingest_rate_limit: Option<u32>,
    pub retention: RetentionSettings,
    /// Alert emails by SMTP; without it they stay in the outbox.
    pub mail: Option<MailSettings>,
    pub sessions: SessionSettings,
    /// Where users reach this installation, for the links in emails and
    /// portal URLs; unset, `http://` and the address it listens on.
    pub public_url: Option<String>,
    /// Origins that may show portal sessions in a frame.
    pub embed_origins: Vec<String>,
    pub brand: app::model::Brand,
    /// A bulk replay of more deliveries than this is announced
    /// `replay_notice` before its first redelivery (chapter 003).
    pub replay_notice_threshold: i64,
    pub replay_notice: std::time::Duration,
}

/// How long a dashboard sign-in lasts.
#[derive(Debug, Clone, Copy)]
pub struct SessionSettings {
    /// Signed out after this long without a request.
    pub idle: std::time::Duration,
    /// Signed out this long after signing in, however busy.
    pub max_age: std::time::Duration,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            idle: std::time::Duration::from_secs(12 * 3600),
            max_age: std::time::Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl ServeConfig {
    /// What this node does, as `--role` names it (`none` only in tests).
    pub fn role(&self) -> &'static str {
        match (self.run_workers, self.serve_api) {
            (true, true) => "all",
            (false, true) => "api",
            (true, false) => "worker",
            (false, false) => "none",
        }
    }

    /// Settings for a test server: any free port, no https.
    pub fn for_tests() -> Self {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            metrics_listen: None,
            otlp_endpoint: None,
            site_root: None,
            secure_cookies: false,
            delivery: DeliverySettings {
                // Test receivers listen on 127.0.0.1; nothing else internal.
                targets: TargetPolicy {
                    allow_private: false,
                    allowed: vec![ipnet::IpNet::from(std::net::IpAddr::from([127, 0, 0, 1]))],
                },
                // Tests send many deliveries at one frozen instant; those
                // about pacing set the limits they test.
                default_rate_limit: None,
                max_in_flight_per_host: None,
                ..DeliverySettings::default()
            },
            run_workers: false,
            serve_api: true,
            resends_per_minute: 100,
            max_endpoints_per_account: 100,
            // Tests that are about the limit set it; the rest send bursts.
            ingest_rate_limit: None,
            retention: RetentionSettings::default(),
            mail: None,
            sessions: SessionSettings::default(),
            public_url: None,
            embed_origins: Vec::new(),
            brand: app::model::Brand::default(),
            replay_notice_threshold: 1000,
            replay_notice: std::time::Duration::from_secs(600),
        }
    }
}

/// `--public-url`: an absolute http(s) URL, kept without a trailing slash.
pub fn parse_public_url(raw: &str) -> Result<String, String> {
    let url = url::Url::parse(raw.trim()).map_err(|e| format!("{raw:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!("{raw:?} must be an http or https URL with a host"));
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// One of `--embed-origins`: scheme, host and port, nothing else.
pub fn parse_origin(raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    let url = url::Url::parse(raw).map_err(|e| format!("{raw:?} is not an origin: {e}"))?;
    let bare = url.path() == "/" && url.query().is_none() && url.fragment().is_none();
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() || !bare {
        return Err(format!(
            "{raw:?} is not an origin such as https://app.example.com"
        ));
    }
    Ok(url.origin().ascii_serialization())
}

pub fn parse_brand_name(raw: &str) -> Result<String, String> {
    let name = raw.trim();
    if name.is_empty() || name.chars().count() > 60 || name.chars().any(char::is_control) {
        return Err("the brand name must be 1 to 60 characters".into());
    }
    Ok(name.to_string())
}

/// A CSS colour that can only ever be a colour where it lands (a style
/// attribute): hex, a name, or rgb()/hsl() of numbers.
pub fn parse_colour(raw: &str) -> Result<String, String> {
    let c = raw.trim();
    let hex = c.strip_prefix('#').is_some_and(|h| {
        matches!(h.len(), 3 | 4 | 6 | 8) && h.chars().all(|x| x.is_ascii_hexdigit())
    });
    let name = !c.is_empty() && c.len() <= 20 && c.chars().all(|x| x.is_ascii_alphabetic());
    let function = ["rgb(", "rgba(", "hsl(", "hsla("]
        .iter()
        .find_map(|f| c.strip_prefix(f))
        .and_then(|rest| rest.strip_suffix(')'))
        .is_some_and(|args| {
            !args.is_empty()
                && args.len() <= 40
                && args.chars().all(|x| {
                    x.is_ascii_digit() || " .,%/".contains(x) || x == 'd' || x == 'e' || x == 'g'
                })
        });
    if hex || name || function {
        Ok(c.to_string())
    } else {
        Err(format!(
            "{raw:?} is not a CSS colour such as #0a7cff, teal or rgb(10 124 255)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_colours_and_nothing_else() {
        for ok in [
            "#fff",
            "#0a7cff",
            "#0a7cff80",
            "teal",
            "rgb(10 124 255)",
            "hsl(200deg 50% 40%)",
        ] {
            assert!(parse_colour(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "#ggg",
            "red;color:blue",
            "url(x)",
            "rgb(1,2,3);x",
            "expression(1)",
            "#12345",
        ] {
            assert!(parse_colour(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn origins_are_only_scheme_host_and_port() {
        assert_eq!(
            parse_origin("https://app.example.com").unwrap(),
            "https://app.example.com"
        );
        assert_eq!(
            parse_origin("http://localhost:5173/").unwrap(),
            "http://localhost:5173"
        );
        for bad in [
            "app.example.com",
            "https://app.example.com/x",
            "javascript:alert(1)",
            "*",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }
}
