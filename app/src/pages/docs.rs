//! The delivery contract, written from this installation's live settings:
//! what we send, when we retry, when we give up, how to verify.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::{
    api::account::get_contract,
    components::layout::{ErrorNotice, Layout},
    model::account::Contract,
};

#[component]
pub fn DocsPage() -> impl IntoView {
    let contract = Resource::new(|| (), |_| get_contract());
    view! {
        <Title text="Docs" />
        <Layout>
            <h1>"Delivery contract"</h1>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match contract.await {
                        Ok(c) => view! { <ContractView c /> }.into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Suspense>
        </Layout>
    }
}

#[component]
fn ContractView(c: Contract) -> impl IntoView {
    let jitter = if c.jitter == "equal" {
        "each wait is random between half the step and the full step"
    } else {
        "each wait is random between zero and the full step"
    };
    view! {
        <section class="card docs">
            <h2>"What we send"</h2>
            <p>
                "One HTTPS or HTTP " <code>"POST"</code> " per attempt with "
                <code>"content-type: application/json"</code>
                " and the event's payload as the body, byte for byte the same on every attempt. "
                "We wait at most " {c.connect_timeout.clone()} " to connect and "
                {c.request_timeout.clone()} " for the whole answer, and never follow redirects."
            </p>
            <dl class="headers">
                <dt>"webhook-id"</dt><dd>"the event id; the same on every retry, so you can drop duplicates"</dd>
                <dt>"webhook-timestamp"</dt><dd>"unix seconds when this attempt was signed"</dd>
                <dt>"webhook-signature"</dt><dd>"v1,<base64 HMAC-SHA256>; two, space-separated, while a rotated secret overlaps"</dd>
            </dl>
        </section>
        <section class="card docs">
            <h2>"How we read your answer"</h2>
            <ul>
                <li><strong>"2xx"</strong>" — delivered."</li>
                <li><strong data-testid="retry-statuses">{c.retry_statuses.clone()}</strong>
                    " — retried; so are timeouts and refused connections. Any other status is permanent: not retried. "
                    "An endpoint may have a list of its own."</li>
                <li><strong>"410 Gone"</strong>" (unless listed) — permanent, and we pause the endpoint and tell you."</li>
                <li><strong>"404"</strong>" (when listed) — retried, but counted toward pausing a dead endpoint."</li>
                <li><strong>"429, 503"</strong>" — the whole endpoint waits: nothing is sent to it before your Retry-After (seconds or an HTTP date; without one, a growing backoff), no attempt is counted for the wait, and the waiting deliveries come back spread over a tenth of the wait (at least a second)."</li>
            </ul>
            <h3>"How hard we push"</h3>
            <ul>
                <li>{match c.default_rate_limit {
                    Some(r) => format!("At most {r} new attempts per second per endpoint, retries included, unless the endpoint sets its own limit or none."),
                    None => "No rate limit unless the endpoint sets one (retries count against it).".to_string(),
                }}</li>
                <li>{match c.max_in_flight_per_host {
                    Some(n) => format!("At most {n} attempts at once to one receiver (host and port), across all endpoints and accounts."),
                    None => "No cap per receiver host beyond each endpoint's own.".to_string(),
                }}</li>
                <li>"Each endpoint's " <code>"max_in_flight"</code> " is a ceiling: after a 429, a 503 or a timeout we halve the attempts we keep in flight to it (not below one), and add one back after each run of as many successes."</li>
            </ul>
        </section>
        <section class="card docs">
            <h2>"When we retry and when we give up"</h2>
            <p>
                "At most " <strong data-testid="max-attempts">{c.max_attempts}</strong> " attempts within "
                <strong data-testid="retry-window">{c.retry_window.clone()}</strong>
                " of the event; after that the delivery is expired and you can resend it from the dashboard ("
                {c.resends_per_minute} " resends per endpoint per minute). "
                {match c.retry_strategy.as_str() {
                    "linear" => "Waits grow by one step after each failure (",
                    "fixed" => "Waits are the same after each failure (",
                    _ => "Waits double after each failure (",
                }}
                {jitter} "):"
            </p>
            <table class="table small" data-testid="schedule">
                <thead><tr><th>"Attempt"</th><th>"Waits at least"</th><th>"Waits at most"</th></tr></thead>
                <tbody>
                    {c.schedule
                        .iter()
                        .map(|(n, lo, hi)| view! { <tr><td data-label="Attempt">{*n}</td><td data-label="Waits at least">{lo.clone()}</td><td data-label="Waits at most">{hi.clone()}</td></tr> })
                        .collect_view()}
                </tbody>
            </table>
            <p class="muted small" data-testid="paused-window">
                "A paused endpoint keeps queueing, and its deliveries keep their retry window: one that is still waiting when the window passes expires. "
                "Resend a waiting delivery for a fresh window, discard the queue from the endpoint page, or resume: the queue drains."
            </p>
            <p class="muted small">
                "After 5 transient failures in a row we pause attempts to the endpoint briefly (no attempts are used up meanwhile); "
                "after 100 permanent failures in a row, or a day without success while deliveries fail, we pause it and email you."
            </p>
        </section>
        <section class="card docs">
            <h2>"Verify the signature"</h2>
            <p>
                "Compute HMAC-SHA256 over " <code>"{webhook-id}.{webhook-timestamp}.{raw body}"</code>
                " with the base64-decoded part of your secret after " <code>"whsec_"</code>
                ", base64-encode it, and compare it in constant time with each " <code>"v1,"</code>
                " value of the header. Reject timestamps more than five minutes old. After a rotation the old secret keeps signing for "
                {c.rotation_overlap.clone()} "."
            </p>
            <pre class="code"><code>{VERIFY_PY}</code></pre>
        </section>
        <section class="card docs">
            <div class="card-head">
                <h2>"REST API"</h2>
                <a href="/api/openapi.json" data-testid="openapi-link">"OpenAPI document"</a>
            </div>
            <p>"JSON in and out, " <code>"Authorization: Bearer <api key>"</code> "; errors are "
                <code>"{\"error\":{\"code\":…,\"message\":…}}"</code> "."</p>
            <table class="table small" data-testid="api-operations">
                <tbody>
                    {c.api
                        .into_iter()
                        .map(|(method, path, summary)| view! {
                            <tr>
                                <td><code>{method}</code></td>
                                <td><code>{path}</code></td>
                                <td>{summary}</td>
                            </tr>
                        })
                        .collect_view()}
                </tbody>
            </table>
        </section>
    }
}

const VERIFY_PY: &str = r#"import base64, hashlib, hmac, time

def verify(secret: str, headers: dict, body: bytes) -> bool:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    msg_id, ts = headers["webhook-id"], headers["webhook-timestamp"]
    if abs(time.time() - int(ts)) > 300:
        return False
    signed = f"{msg_id}.{ts}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        hmac.compare_digest(expected, sig.split(",", 1)[1])
        for sig in headers["webhook-signature"].split(" ")
        if sig.startswith("v1,")
    )"#;
