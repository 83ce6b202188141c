//! The OTLP/HTTP span exporter, sending through the reqwest client the rest
//! of Dakghar uses (the exporter's own would bring a second reqwest).

use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithHttpConfig};

/// OTLP's path for traces under a collector's base URL.
const TRACES: &str = "/v1/traces";

pub(super) fn build(endpoint: &url::Url) -> Result<SpanExporter, String> {
    let client = Client {
        http: reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())?,
        runtime: tokio::runtime::Handle::try_current()
            .map_err(|_| "traces need the server's runtime".to_string())?,
    };
    SpanExporter::builder()
        .with_http()
        .with_endpoint(traces_url(endpoint))
        .with_http_client(client)
        .build()
        .map_err(|e| e.to_string())
}

/// The collector's base URL with `/v1/traces`, unless it names it already.
pub(super) fn traces_url(endpoint: &url::Url) -> String {
    let url = endpoint.as_str().trim_end_matches('/');
    if url.ends_with(TRACES) {
        url.to_string()
    } else {
        format!("{url}{TRACES}")
    }
}

/// The batch processor exports from a thread of its own, outside the
/// runtime that reqwest needs: each request runs as a task on it.
#[derive(Debug)]
struct Client {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let http = self.http.clone();
        let request = reqwest::Request::try_from(request)?;
        self.runtime
            .spawn(async move {
                let response = http.execute(request).await?;
                let mut answer = http::Response::builder().status(response.status());
                for (name, value) in response.headers() {
                    answer = answer.header(name, value);
                }
                let body = response.bytes().await?;
                Ok::<_, HttpError>(answer.body(body)?)
            })
            .await?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_once() {
        for (given, wanted) in [
            ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
            ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
            (
                "http://c:4318/otlp/v1/traces",
                "http://c:4318/otlp/v1/traces",
            ),
        ] {
            assert_eq!(traces_url(&given.parse().unwrap()), wanted);
        }
    }
}
