//! One event: what was sent, and per endpoint what it answered, when the
//! next try is, and a Resend button. While anything is still moving the
//! page refreshes itself, so a resend's new attempt appears on its own.

use std::{collections::HashMap, time::Duration};

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::{
    api::events::{get_event, ResendDelivery},
    components::{
        copy_button::CopyButton,
        layout::{allowed, ErrorNotice, Layout},
    },
    error::AppError,
    format,
    model::events::{AttemptView, DeliveryDetail, EventDetail, Status},
};

/// Seconds each delivery's Resend must still wait, by delivery id. Kept at
/// page level so a refresh of the cards does not reset a countdown.
type Waits = RwSignal<HashMap<String, u64>>;

#[component]
pub fn EventDetailPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let refresh = RwSignal::new(0u32);
    let detail = Resource::new(move || (id(), refresh.get()), |(id, _)| get_event(id));
    let waits: Waits = RwSignal::new(HashMap::new());

    // In the browser only: poll while a delivery is moving, and count down.
    Effect::new(move |_| {
        let poll = set_interval_with_handle(
            move || {
                let moving = detail
                    .get_untracked()
                    .and_then(Result::ok)
                    .is_some_and(|d| d.deliveries.iter().any(|x| x.status.is_active()));
                if moving {
                    refresh.update(|n| *n = n.wrapping_add(1));
                }
            },
            Duration::from_millis(1500),
        )
        .ok();
        let tick = set_interval_with_handle(
            move || {
                if waits.with_untracked(|w| w.values().any(|s| *s > 0)) {
                    waits.update(|w| w.values_mut().for_each(|s| *s = s.saturating_sub(1)));
                }
            },
            Duration::from_secs(1),
        )
        .ok();
        on_cleanup(move || {
            for handle in [poll, tick].into_iter().flatten() {
                handle.clear();
            }
        });
    });

    view! {
        <Title text="Event" />
        <Layout>
            <p class="crumbs">
                <a href="/events">"← Events"</a>
            </p>
            <Transition fallback=|| view! { <p class="muted">"Loading the event…"</p> }>
                {move || Suspend::new(async move {
                    match detail.await {
                        Ok(event) => {
                            let resent = Callback::new(move |_| refresh.update(|n| *n = n.wrapping_add(1)));
                            view! { <EventView event waits resent /> }.into_any()
                        }
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Transition>
        </Layout>
    }
}

#[component]
fn EventView(event: EventDetail, waits: Waits, resent: Callback<()>) -> impl IntoView {
    let sent_headers = event
        .deliveries
        .iter()
        .flat_map(|d| d.attempts.last())
        .map(|a| a.request_headers.clone())
        .next();
    let now = event.now;
    view! {
        <div class="page-head">
            <h1>
                <span class="event-type">{event.event_type.clone()}</span>
            </h1>
            <p class="muted">
                <code data-testid="event-id">{event.id.clone()}</code>
                " · created "
                {format::time(event.created_at)}
            </p>
        </div>
        <div class="grid two">
            <section class="card">
                <div class="card-head">
                    <h2>"Payload"</h2>
                    <CopyButton text=event.payload_pretty.clone() label="Copy" />
                </div>
                <pre class="code" data-testid="payload"><code>{event.payload_pretty.clone()}</code></pre>
            </section>
            <section class="card">
                <h2>"Headers as sent"</h2>
                {match sent_headers {
                    Some(headers) => view! { <Headers headers /> }.into_any(),
                    None => view! { <p class="muted">"Not sent yet."</p> }.into_any(),
                }}
                <p class="muted small">
                    "webhook-timestamp and webhook-signature are fresh on every attempt; "
                    "webhook-id and the body never change."
                </p>
            </section>
        </div>
        <h2>"Deliveries"</h2>
        {if event.deliveries.is_empty() {
            view! {
                <p class="card muted">
                    "No endpoint was subscribed to this event type when it arrived."
                </p>
            }
                .into_any()
        } else {
            event
                .deliveries
                .into_iter()
                .map(|delivery| view! { <DeliveryCard delivery now waits resent /> })
                .collect_view()
                .into_any()
        }}
    }
}

#[component]
fn DeliveryCard(
    delivery: DeliveryDetail,
    now: i64,
    waits: Waits,
    resent: Callback<()>,
) -> impl IntoView {
    let status = delivery.status;
    let when = match (delivery.next_attempt_at, delivery.finished_at) {
        (Some(next), _) => format!(
            "Next attempt {} ({}) · gives up {}",
            format::relative(next, now),
            format::time(next),
            format::time(delivery.give_up_at)
        ),
        (None, Some(done)) => format!("Finished {}", format::time(done)),
        (None, None) => format!("Gives up {}", format::time(delivery.give_up_at)),
    };
    let attempts = delivery.attempts.len();
    let resend_id = delivery.id.clone();
    let may_resend = allowed(|m| m.can_change);
    // A paused endpoint's waiting delivery may be resent too: it starts a
    // fresh retry window instead of expiring while paused.
    let resendable = status.can_resend()
        || (delivery.endpoint_paused && matches!(status, Status::Pending | Status::Retrying));
    view! {
        <section class="card delivery" data-testid="delivery" data-delivery-id=delivery.id>
            <div class="card-head">
                <div>
                    <span class=status.class() data-testid="delivery-state">
                        {status.label()}
                    </span>
                    " "
                    <a href=format!("/endpoints/{}", delivery.endpoint_id) class="endpoint-url">
                        {delivery.endpoint_url.clone()}
                    </a>
                </div>
                <Show when=move || resendable && may_resend>
                    <ResendButton delivery_id=resend_id.clone() waits resent />
                </Show>
            </div>
            <p class="muted small" data-testid="delivery-when">
                {when}
                {format!(" · {attempts} attempt{}", if attempts == 1 { "" } else { "s" })}
            </p>
            {delivery
                .last_error
                .clone()
                .map(|e| view! { <p class="notice warn small">{e}</p> })}
            <ol class="timeline" data-testid="attempts">
                {delivery
                    .attempts
                    .into_iter()
                    .map(|attempt| view! { <Attempt attempt /> })
                    .collect_view()}
            </ol>
        </section>
    }
}

#[component]
fn Attempt(attempt: AttemptView) -> impl IntoView {
    let outcome = match (attempt.status, &attempt.error) {
        (Some(code), _) => code.to_string(),
        (None, Some(_)) => "no response".to_string(),
        (None, None) => "—".to_string(),
    };
    let ok = attempt.status.is_some_and(|s| (200..300).contains(&s));
    view! {
        <li class="attempt" data-testid="attempt">
            <div class="attempt-line">
                <span class="attempt-no">{format!("#{}", attempt.number)}</span>
                <span class=if ok { "status ok" } else { "status bad" } data-testid="attempt-status">
                    {outcome}
                </span>
                <span class="muted" data-testid="attempt-duration">
                    {format::duration_ms(attempt.duration_ms)}
                </span>
                <span class="muted">{format::time(attempt.started_at)}</span>
            </div>
            <p class="explanation" data-testid="attempt-explanation">{attempt.explanation.clone()}</p>
            {attempt.error.clone().map(|e| view! { <p class="notice warn small">{e}</p> })}
            <details>
                <summary>"Request and response"</summary>
                <div class="grid two">
                    <div>
                        <h3>"Request headers"</h3>
                        <Headers headers=attempt.request_headers.clone() />
                    </div>
                    <div>
                        <h3>"Response headers"</h3>
                        <Headers headers=attempt.response_headers.clone() />
                    </div>
                </div>
                <h3>"Response body (first 512 bytes)"</h3>
                <pre class="code small">
                    <code>{attempt.response_snippet.clone().unwrap_or_else(|| "(none)".into())}</code>
                </pre>
                <div class="card-head">
                    <h3>"Reproduce with curl"</h3>
                    <CopyButton text=attempt.curl.clone() label="Copy as curl" />
                </div>
                <pre class="code small"><code>{attempt.curl.clone()}</code></pre>
            </details>
        </li>
    }
}

#[component]
fn Headers(headers: Vec<(String, String)>) -> impl IntoView {
    if headers.is_empty() {
        return view! { <p class="muted small">"(none)"</p> }.into_any();
    }
    view! {
        <dl class="headers">
            {headers
                .into_iter()
                .map(|(k, v)| view! { <dt>{k}</dt><dd><code>{v}</code></dd> })
                .collect_view()}
        </dl>
    }
    .into_any()
}

/// Resend, with "Try again in N s" counting down when the endpoint's resend
/// budget is spent. A plain form post without JavaScript.
#[component]
fn ResendButton(delivery_id: String, waits: Waits, resent: Callback<()>) -> impl IntoView {
    let action = ServerAction::<ResendDelivery>::new();
    let id = delivery_id.clone();
    let error = RwSignal::new(None::<String>);
    Effect::new(move |_| match action.value().get() {
        Some(Ok(())) => {
            error.set(None);
            resent.run(());
        }
        Some(Err(AppError::RateLimited { retry_after_s })) => {
            error.set(None);
            waits.update(|w| {
                w.insert(id.clone(), retry_after_s.max(1));
            });
        }
        Some(Err(e)) => error.set(Some(e.to_string())),
        None => {}
    });
    let key = StoredValue::new(delivery_id.clone());
    let wait = move || waits.with(|w| key.with_value(|k| w.get(k).copied().unwrap_or(0)));
    let blocked = move || wait() > 0 || action.pending().get();
    let label = move || {
        let left = wait();
        if left > 0 {
            format!("Try again in {left} s")
        } else if action.pending().get() {
            "Resending…".to_string()
        } else {
            "Resend".to_string()
        }
    };
    view! {
        <ActionForm action=action attr:class="resend">
            <input type="hidden" name="delivery_id" value=delivery_id />
            <button
                type="submit"
                class="button primary small"
                data-testid="resend"
                disabled=blocked
            >
                {label}
            </button>
            {move || error.get().map(|e| view! { <span class="notice error small" role="alert">{e}</span> })}
        </ActionForm>
    }
}
