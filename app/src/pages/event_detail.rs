//! One event: what was sent, and per endpoint what it answered, when the
//! next try is, and a Resend button. While a delivery is due within the
//! minute the browser asks again every 1.5 s and changes only what changed
//! (a badge, a time, a new attempt at the top): open panels, focus and
//! selection stay. Without JavaScript a Refresh link does it.

use std::{collections::HashMap, time::Duration};

use leptos::{prelude::*, task::spawn_local};
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use crate::{
    api::events::{get_event, signed_curl, ResendDelivery},
    components::{
        copy_button::CopyButton,
        layout::{allowed, ErrorNotice, Layout},
        raw_or_pretty::RawOrPretty,
        time::Time,
    },
    error::AppError,
    format,
    model::events::{AttemptView, DeliveryDetail, EventDetail, Status},
};

/// Seconds each delivery's Resend must still wait, by delivery id. Kept at
/// page level so an update of a card does not reset a countdown.
type Waits = RwSignal<HashMap<String, u64>>;

/// How far ahead a due attempt keeps the page asking for news.
const LOOK_AHEAD_MS: i64 = 60_000;
const POLL: Duration = Duration::from_millis(1500);

#[component]
pub fn EventDetailPage() -> impl IntoView {
    // Event ids are the producer's: read them from the path, decoded once
    // (see `format::from_path_segment`), not from the router's parameters.
    let here = use_location();
    let id = move || {
        here.pathname
            .with(|p| format::from_path_segment(p.strip_prefix("/events/").unwrap_or_default()))
    };
    // Fetched once per event; updates arrive through `Live`, not a refetch
    // that would rebuild the page.
    let detail = Resource::new(id, get_event);
    view! {
        <Title text="Event" />
        <Layout>
            <p class="crumbs">
                <a href="/events">"← Events"</a>
            </p>
            <Transition fallback=|| view! { <p class="muted">"Loading the event…"</p> }>
                {move || Suspend::new(async move {
                    match detail.await {
                        Ok(event) => view! { <EventView event /> }.into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Transition>
        </Layout>
    }
}

/// The page's moving parts: one signal per delivery and the clock, so an
/// update touches only the cards that changed.
#[derive(Clone, Copy)]
struct Live {
    event_id: StoredValue<String>,
    cards: StoredValue<Vec<RwSignal<DeliveryDetail>>>,
    /// The server's clock, advanced locally between updates.
    now: RwSignal<i64>,
}

impl Live {
    fn new(event: &EventDetail) -> Live {
        Live {
            event_id: StoredValue::new(event.id.clone()),
            cards: StoredValue::new(
                event
                    .deliveries
                    .iter()
                    .cloned()
                    .map(RwSignal::new)
                    .collect(),
            ),
            now: RwSignal::new(event.now),
        }
    }

    /// Something may change within the minute: an attempt on the wire, or
    /// one due soon.
    fn due_soon(&self) -> bool {
        let now = self.now.get_untracked();
        self.cards.with_value(|cards| {
            cards.iter().any(|c| {
                c.with_untracked(|d| {
                    d.status == Status::InFlight
                        || (d.status.is_active()
                            && d.next_attempt_at.is_none_or(|at| at <= now + LOOK_AHEAD_MS))
                })
            })
        })
    }

    /// Reads the event again and writes each card that changed.
    fn update(self) {
        let id = self.event_id.get_value();
        spawn_local(async move {
            let Ok(fresh) = get_event(id).await else {
                return;
            };
            self.now.set(fresh.now);
            self.cards.with_value(|cards| {
                for card in cards {
                    let id = card.with_untracked(|d| d.id.clone());
                    if let Some(new) = fresh.deliveries.iter().find(|d| d.id == id) {
                        if card.with_untracked(|old| old != new) {
                            card.set(new.clone());
                        }
                    }
                }
            });
        });
    }
}

#[component]
fn EventView(event: EventDetail) -> impl IntoView {
    let live = Live::new(&event);
    let waits: Waits = RwSignal::new(HashMap::new());
    let hydrated = crate::components::hydrated();

    // In the browser only: ask for news while something is due, never
    // while the tab is hidden, and count down.
    Effect::new(move |_| {
        let poll = set_interval_with_handle(
            move || {
                if !tab_hidden() && live.due_soon() {
                    live.update();
                }
            },
            POLL,
        )
        .ok();
        let tick = set_interval_with_handle(
            move || {
                live.now.update(|n| *n += 1000);
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

    let resent = Callback::new(move |_| live.update());
    // The newest attempt's headers: they are what a receiver saw last.
    let sent_headers = move || {
        live.cards.with_value(|cards| {
            cards
                .iter()
                .find_map(|c| c.with(|d| d.attempts.first().map(|a| a.request_headers.clone())))
        })
    };
    let moving = move || {
        live.cards
            .with_value(|cards| cards.iter().any(|c| c.with(|d| d.status.is_active())))
    };
    let here = use_location();
    let refresh_href = move || here.pathname.get();
    let payload = event.payload.clone();
    view! {
        <div class="page-head">
            <h1>
                <span class="event-type">{event.event_type.clone()}</span>
            </h1>
            <p class="muted">
                <code data-testid="event-id">{event.id.clone()}</code>
                " · created "
                <Time ms=event.created_at />
                <Show when=move || moving() && !hydrated.get()>
                    " · "
                    <a href=refresh_href data-testid="refresh">"Refresh"</a>
                </Show>
            </p>
        </div>
        <div class="grid two">
            <section class="card">
                <div class="card-head">
                    <h2>"Payload"</h2>
                    <CopyButton text=payload.clone() label="Copy" />
                </div>
                <RawOrPretty raw=payload name="payload".to_string() testid="payload" />
                <p class="muted small">
                    "Pretty only re-indents; Raw and Copy are the exact bytes that were signed."
                </p>
            </section>
            <section class="card">
                <h2>"Headers as sent"</h2>
                {move || match sent_headers() {
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
            live.cards
                .get_value()
                .into_iter()
                .map(|card| view! { <DeliveryCard card now=live.now waits resent /> })
                .collect_view()
                .into_any()
        }}
    }
}

#[cfg(feature = "hydrate")]
fn tab_hidden() -> bool {
    document().hidden()
}

#[cfg(not(feature = "hydrate"))]
fn tab_hidden() -> bool {
    false
}

#[component]
fn DeliveryCard(
    card: RwSignal<DeliveryDetail>,
    now: RwSignal<i64>,
    waits: Waits,
    resent: Callback<()>,
) -> impl IntoView {
    // What never changes is read once; the rest follows the signal.
    let (id, endpoint_id, name, url) = card.with_untracked(|d| {
        (
            d.id.clone(),
            d.endpoint_id.clone(),
            d.endpoint_name.clone(),
            d.endpoint_url.clone(),
        )
    });
    let status = move || card.with(|d| d.status);
    // Rebuilt only when the card changes; the relative part follows the
    // clock on its own.
    let when = move || {
        card.with(|d| {
            let attempts = d.attempts.len();
            let count = format!(" · {attempts} attempt{}", if attempts == 1 { "" } else { "s" });
            let give_up = d.give_up_at;
            match (d.next_attempt_at, d.finished_at) {
                (Some(next), _) => view! {
                    "Next attempt " {move || format::relative(next, now.get())} " (" <Time ms=next />
                    ") · gives up " <Time ms=give_up /> {count}
                }
                .into_any(),
                (None, Some(done)) => view! { "Finished " <Time ms=done /> {count} }.into_any(),
                (None, None) => view! { "Gives up " <Time ms=give_up /> {count} }.into_any(),
            }
        })
    };
    let may_resend = allowed(|m| m.can_change);
    let may_sign = allowed(|m| m.can_see_secrets);
    // A paused endpoint's waiting delivery may be resent too: it starts a
    // fresh retry window instead of expiring while paused.
    let resendable = move || {
        card.with(|d| {
            d.status.can_resend()
                || (d.endpoint_paused && matches!(d.status, Status::Pending | Status::Retrying))
        })
    };
    let resend_id = id.clone();
    let delivery_id = StoredValue::new(id.clone());
    view! {
        <section class="card delivery" data-testid="delivery" data-delivery-id=id>
            <div class="card-head">
                <div>
                    <span class=move || status().class() data-testid="delivery-state">
                        {move || status().label()}
                    </span>
                    " "
                    <a href=format!("/endpoints/{endpoint_id}") class="endpoint-url" title=url>
                        {name}
                    </a>
                </div>
                <Show when=move || resendable() && may_resend>
                    <ResendButton delivery_id=resend_id.clone() waits resent />
                </Show>
            </div>
            <p class="muted small" data-testid="delivery-when">{when}</p>
            {move || {
                card.with(|d| d.last_error.clone())
                    .map(|e| view! { <p class="notice warn small">{e}</p> })
            }}
            // New attempts are announced, politely, to screen readers.
            <ol class="timeline" data-testid="attempts" aria-live="polite">
                <For
                    each=move || card.with(|d| d.attempts.clone())
                    key=|a| a.number
                    children=move |attempt| {
                        view! { <Attempt attempt delivery_id=delivery_id.get_value() may_sign /> }
                    }
                />
            </ol>
        </section>
    }
    // Erased: the card's full type is too deep for the wasm build.
    .into_any()
}

#[component]
fn Attempt(attempt: AttemptView, delivery_id: String, may_sign: bool) -> impl IntoView {
    let outcome = match (attempt.status, &attempt.error) {
        (Some(code), _) => code.to_string(),
        (None, Some(_)) => "no response".to_string(),
        (None, None) => "—".to_string(),
    };
    let ok = attempt.status.is_some_and(|s| (200..300).contains(&s));
    let body_name = format!("response-{delivery_id}-{}", attempt.number);
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
                <span class="muted"><Time ms=attempt.started_at /></span>
            </div>
            <p class="explanation" data-testid="attempt-explanation">{attempt.explanation.clone()}</p>
            {attempt.error.clone().map(|e| view! { <p class="notice warn small">{e}</p> })}
            <details data-testid="attempt-details">
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
                {match attempt.response_snippet.clone() {
                    Some(body) => view! {
                        <RawOrPretty raw=body name=body_name testid="response-body" small=true />
                    }
                        .into_any(),
                    None => view! { <p class="muted small">"(none)"</p> }.into_any(),
                }}
                <Curl recipe=attempt.curl.clone() delivery_id may_sign />
            </details>
        </li>
    }
    .into_any()
}

/// "Reproduce with curl". Who may see secrets copies a command the server
/// signs at that moment, which verifies at the receiver; everyone else
/// (and every page without JavaScript) gets the recipe that signs with the
/// secret pasted in.
#[component]
fn Curl(recipe: String, delivery_id: String, may_sign: bool) -> impl IntoView {
    let signed = RwSignal::new(None::<Result<String, String>>);
    let hydrated = crate::components::hydrated();
    let id = StoredValue::new(delivery_id);
    let fetch = move |_| {
        spawn_local(async move {
            let answer = signed_curl(id.get_value()).await;
            if let Ok(command) = &answer {
                crate::components::copy_button::copy_to_clipboard(command);
            }
            signed.set(Some(answer.map_err(|e| e.to_string())));
        });
    };
    let shown = {
        let recipe = recipe.clone();
        move || match signed.get() {
            Some(Ok(command)) => command,
            _ => recipe.clone(),
        }
    };
    view! {
        <div class="card-head">
            <h3>"Reproduce with curl"</h3>
            {if may_sign {
                view! {
                    <Show when=move || hydrated.get()>
                        <button
                            type="button"
                            class="button small secondary copy"
                            data-testid="copy-signed-curl"
                            on:click=fetch
                        >
                            {move || if matches!(signed.get(), Some(Ok(_))) {
                                "Copied (signed now)"
                            } else {
                                "Copy as curl"
                            }}
                        </button>
                    </Show>
                }
                    .into_any()
            } else {
                view! { <CopyButton text=recipe.clone() label="Copy as curl" /> }.into_any()
            }}
        </div>
        {move || match signed.get() {
            Some(Err(e)) => Some(view! { <p class="notice error small" role="alert">{e}</p> }),
            _ => None,
        }}
        <pre class="code small" data-testid="curl"><code>{shown}</code></pre>
    }
    .into_any()
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
    // Without JavaScript the refusal comes back in the URL the form post
    // is redirected to; the action starts with it, and so does the page.
    let error = RwSignal::new(None::<String>);
    // Every Resend on the page shares the server function, so the answer
    // names the delivery it is about.
    match action.value().get_untracked() {
        Some(Err(AppError::RateLimited {
            retry_after_s,
            delivery_id: Some(about),
        })) if about == id => waits.update_untracked(|w| {
            w.entry(id.clone()).or_insert(retry_after_s.max(1));
        }),
        _ => {}
    }
    Effect::new(move |_| match action.value().get() {
        Some(Ok(())) => {
            error.set(None);
            resent.run(());
        }
        Some(Err(AppError::RateLimited { retry_after_s, .. })) => {
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
