//! Endpoint URLs as customers type them, validated once on the way in.

/// An http(s) URL with a host, no credentials, at most 2048 characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointUrl(String);

pub const MAX_URL_CHARS: usize = 2048;

impl EndpointUrl {
    pub fn parse(raw: &str) -> Result<Self, String> {
        // Counted as sent, as the API's schema counts it.
        if raw.chars().count() > MAX_URL_CHARS {
            return Err(format!("url is longer than {MAX_URL_CHARS} characters"));
        }
        let raw = raw.trim();
        if raw.is_empty() {
            return Err("url is required".into());
        }
        let url = url::Url::parse(raw).map_err(|e| format!("url is not a valid URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "url scheme must be http or https, not {}",
                url.scheme()
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("url must name a host".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("url must not contain a user name or password".into());
        }
        if let Some(reason) = url.host_str().and_then(super::lookalike_host::refuse) {
            return Err(format!("url {reason}"));
        }
        Ok(EndpointUrl(url.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::EndpointUrl;

    #[test]
    fn accepts_http_and_https_with_a_host() {
        for ok in [
            "https://hooks.example.com/in",
            "http://127.0.0.1:9000/x?y=1",
        ] {
            assert!(EndpointUrl::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_everything_else_naming_the_problem() {
        let long = format!("https://example.com/{}", "a".repeat(2048));
        let table = [
            ("", "required"),
            ("ftp://example.com/", "scheme"),
            ("javascript:alert(1)", "scheme"),
            ("https://user:pw@example.com/", "user name or password"),
            ("https://user@example.com/", "user name or password"),
            ("not a url", "not a valid URL"),
            ("http://", "not a valid URL"),
            (long.as_str(), "longer than 2048"),
            ("https://pаypal.com/hook", "could pass for another name"),
        ];
        for (raw, expect) in table {
            let err = EndpointUrl::parse(raw).unwrap_err();
            assert!(err.contains(expect), "{raw}: {err}");
        }
    }

    proptest::proptest! {
        #[test]
        fn fuzz_endpoint_urls_are_checked_once_and_stay_valid(
            raw in proptest::prop_oneof![
                "\\PC{0,80}",
                "(https?|ftp|javascript|file)://([a-z0-9.@:-]|\\PC){0,30}(/[\\PC]{0,20})?",
                "https?://[0-9x.]{1,20}(:[0-9]{1,6})?/",
            ]
        ) {
            if let Ok(url) = EndpointUrl::parse(&raw) {
                let again = EndpointUrl::parse(url.as_str());
                proptest::prop_assert_eq!(again.as_ref(), Ok(&url), "normalising twice changes nothing");
                let parsed = url::Url::parse(url.as_str()).unwrap();
                proptest::prop_assert!(matches!(parsed.scheme(), "http" | "https"));
                proptest::prop_assert!(parsed.username().is_empty() && parsed.password().is_none());
                proptest::prop_assert!(parsed.host_str().is_some_and(|h| !h.is_empty()));
            }
        }
    }
}
