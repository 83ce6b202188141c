//! One endpoint's health: success rates, latency, attempts per hour, the
//! last errors and the queue waiting for it; and what can be done about it.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::{
    api::endpoints::{
        get_endpoint, DeleteEndpoint, DiscardQueue, PauseEndpoint, ResumeEndpoint, RevealSecret,
        RotateSecret, SendTestEvent,
    },
    components::{
        charts::{AttemptsChart, ChartData, DailyData, LatencyChart},
        layout::{allowed, ErrorNotice, Layout},
        time::Time,
    },
    format,
    model::endpoints::{percent, EndpointDetail},
    pages::endpoints::ConditionBadge,
};

#[component]
pub fn EndpointDetailPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let pause = ServerAction::<PauseEndpoint>::new();
    let resume = ServerAction::<ResumeEndpoint>::new();
    let rotate = ServerAction::<RotateSecret>::new();
    let test_event = ServerAction::<SendTestEvent>::new();
    let discard = ServerAction::<DiscardQueue>::new();
    let changed = move || {
        (
            pause.version().get(),
            resume.version().get(),
            rotate.version().get(),
            test_event.version().get(),
            discard.version().get(),
        )
    };
    let detail = Resource::new(move || (id(), changed()), |(id, _)| get_endpoint(id));
    let actions = Actions {
        pause,
        resume,
        rotate,
        test_event,
        discard,
    };
    view! {
        <Title text="Endpoint" />
        <Layout>
            <p class="crumbs">
                <a href="/endpoints">"← Endpoints"</a>
            </p>
            <Transition fallback=|| view! { <p class="muted">"Loading the endpoint…"</p> }>
                {move || Suspend::new(async move {
                    match detail.await {
                        Ok(d) => view! { <EndpointView d actions /> }.into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Transition>
        </Layout>
    }
}

#[derive(Clone, Copy)]
struct Actions {
    pause: ServerAction<PauseEndpoint>,
    resume: ServerAction<ResumeEndpoint>,
    rotate: ServerAction<RotateSecret>,
    test_event: ServerAction<SendTestEvent>,
    discard: ServerAction<DiscardQueue>,
}

#[component]
fn EndpointView(d: EndpointDetail, actions: Actions) -> impl IntoView {
    // Where a recovery confirmed on its page comes back to.
    let recovered = leptos_router::hooks::use_query_map()
        .read_untracked()
        .get("recovered")
        .and_then(|n| n.parse::<i64>().ok());
    let s = &d.summary;
    let (id_toggle, id_test, id_secret, id_delete, id_discard) = (
        s.id.clone(),
        s.id.clone(),
        s.id.clone(),
        s.id.clone(),
        s.id.clone(),
    );
    let rate = |part, whole| match percent(part, whole) {
        Some(p) => format!("{p}%"),
        None => "—".to_string(),
    };
    let ms = format::optional_ms;
    let types = if s.event_types.is_empty() {
        "all events".to_string()
    } else {
        s.event_types.join(", ")
    };
    let limit = match (d.rate_limit_per_sec, d.rate_limit_is_default) {
        (Some(r), true) => format!("{r} per second (the default)"),
        (Some(r), false) => format!("{r} per second"),
        (None, _) => "unlimited".to_string(),
    };
    let cap = if d.in_flight_cap < d.max_in_flight {
        format!(
            "{} now, of {}: lowered after the receiver showed overload (429, 503, timeouts); it grows back by one after a run of successes",
            d.in_flight_cap, d.max_in_flight
        )
    } else {
        d.max_in_flight.to_string()
    };
    let paused = s.condition.is_paused();
    let recover_href = format!("/endpoints/{}/recover", format::path_segment(&s.id));
    let edit_href = format!("/endpoints/{}/edit", format::path_segment(&s.id));
    let failed_here = crate::model::events::EventsQuery {
        state: Some("failed".into()),
        endpoint: Some(s.id.clone()),
        ..Default::default()
    }
    .to_url(None);
    let discarded = move || match actions.discard.value().get() {
        Some(Ok(n)) => Some(
            view! {
                <p class="notice ok small" data-testid="discarded">
                    {format!("Discarded {} queued deliveries.", format::count(n))}
                </p>
            }
            .into_any(),
        ),
        Some(Err(e)) => {
            Some(view! { <p class="notice error small">{e.to_string()}</p> }.into_any())
        }
        _ => None,
    };
    let resumed = move || match actions.resume.value().get() {
        Some(Ok(r)) => {
            Some(view! { <p class="notice ok small" data-testid="resumed">{r.words()}</p> })
        }
        _ => None,
    };
    let sent = move || match actions.test_event.value().get() {
        Some(Ok(event_id)) => Some(view! {
            <p class="notice ok small" data-testid="test-sent">
                "Test event sent: "
                <a href=format!("/events/{}", format::path_segment(&event_id))>{event_id.clone()}</a>
            </p>
        }),
        _ => None,
    };
    view! {
        <div class="page-head">
            <div>
                <h1 class="endpoint-url">{s.url.clone()}</h1>
                <p class="muted">{s.description.clone()}</p>
            </div>
            <div>
                <ConditionBadge condition=s.condition.clone() />
            </div>
        </div>
        {d.fault.clone().map(|(what, since)| view! {
            <p class="notice error" role="alert" data-testid="endpoint-fault">
                "Dakghar cannot send to this endpoint since " <Time ms=since /> ": " {what} ". "
                "This is a fault on our side, not your receiver's: its deliveries wait, without counting an attempt, "
                "and are tried again with a growing pause. Your operator sees it in the logs."
            </p>
        })}
        {d.throttled_until.map(|until| {
            let asked = d.throttle_status.map_or_else(String::new, |s| format!(", {s}"));
            view! {
                <p class="notice warn" data-testid="throttled">
                    "Throttled until " <Time ms=until /> {format!(" (receiver asked{asked}). ")}
                    "Every delivery to this endpoint waits until then, without counting an attempt, and they come back spread over a short window."
                </p>
            }
        })}
        <div class="tiles">
            <Tile label="Success, 24 h" value=rate(s.delivered_24h, s.attempts_24h) sub=format!("{} attempts", s.attempts_24h) testid="rate-24h" />
            <Tile label="Success, 7 days" value=rate(d.delivered_7d, d.attempts_7d) sub=format!("{} attempts", d.attempts_7d) testid="rate-7d" />
            <Tile label="Average latency, 24 h" value=ms(d.avg_ms_24h) sub=String::new() testid="avg-latency" />
            <Tile label="p95 latency, 24 h" value=ms(d.p95_ms_24h) sub=String::new() testid="p95-latency" />
            <Tile label="Waiting" value=d.pending.to_string() sub=format!("{} in flight", d.in_flight) testid="queue" />
        </div>
        <div class="grid two charts">
            <section class="card">
                <h2>"Attempts per hour, last 24 hours"</h2>
                <AttemptsChart hourly=d.hourly.clone() />
            </section>
            <section class="card">
                <h2>"Latency per hour, last 24 hours"</h2>
                <LatencyChart points=d.latency_hourly.clone() daily=false testid="latency-hourly" />
                <p class="legend small">
                    <span class="mark p50"></span>" p50 (solid line, circles) "
                    <span class="mark p95"></span>" p95 (dashed line, squares) · every attempt, failures included"
                </p>
                <details class="week">
                    <summary>"Latency per day, last 7 days"</summary>
                    <LatencyChart points=d.latency_daily.clone() daily=true testid="latency-daily" />
                </details>
            </section>
        </div>
        <ChartData hourly=d.hourly.clone() latency=d.latency_hourly.clone() />
        <DailyData latency=d.latency_daily.clone() />
        <section class="card">
            <div class="page-head">
                <h2>"Last errors"</h2>
                <a href=failed_here data-testid="failed-here">"Failed deliveries to this endpoint →"</a>
            </div>
            {if d.last_errors.is_empty() {
                view! { <p class="muted">"No failed attempts."</p> }.into_any()
            } else {
                view! {
                    <ul class="errors" data-testid="last-errors">
                        {d
                            .last_errors
                            .iter()
                            .map(|e| {
                                view! {
                                    <li>
                                        <span class="muted small"><Time ms=e.at /></span>
                                        " "
                                        <a href=format!("/events/{}", format::path_segment(&e.event_id))>{e.event_id.clone()}</a>
                                        <div>{e.explanation.clone()}</div>
                                        {e.error.clone().map(|x| view! { <div class="muted small">{x}</div> })}
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                }
                .into_any()
            }}
        </section>
        <div class="grid two">
            <section class="card">
                <h2>"Actions"</h2>
                <div class="actions">
                    {allowed(|m| m.can_change).then(|| view! {
                    {if paused {
                        view! {
                            <ActionForm action=actions.resume>
                                <input type="hidden" name="id" value=id_toggle.clone() />
                                <button type="submit" class="button primary" data-testid="resume">"Resume"</button>
                            </ActionForm>
                        }
                            .into_any()
                    } else {
                        view! {
                            <ActionForm action=actions.pause>
                                <input type="hidden" name="id" value=id_toggle.clone() />
                                <button type="submit" class="button secondary" data-testid="pause">"Pause"</button>
                            </ActionForm>
                        }
                            .into_any()
                    }}
                    <ActionForm action=actions.test_event>
                        <input type="hidden" name="id" value=id_test />
                        <button type="submit" class="button secondary" data-testid="send-test">"Send test event"</button>
                    </ActionForm>
                    <a href=recover_href class="button secondary" data-testid="recover">"Recover failed…"</a>
                    })}
                </div>
                {recovered.map(|n| view! {
                    <p class="notice ok small" data-testid="recovered">
                        {format!("Sending {} again, spread over 5 minutes.", format::deliveries(n))}
                    </p>
                })}
                {sent}
                {resumed}
                {discarded}
                {(paused && d.pending > 0).then(|| allowed(|m| m.can_change).then(|| {
                    let label = format!(
                        "Discard {} queued deliveries",
                        format::count(d.pending)
                    );
                    let question = format!(
                        "Discard {} queued deliveries? They expire and are not sent; each can still be resent or replayed.",
                        format::count(d.pending)
                    );
                    view! {
                        <ActionForm action=actions.discard>
                            <input type="hidden" name="id" value=id_discard.clone() />
                            <input type="hidden" name="expected" value=d.pending.to_string() />
                            <button
                                type="submit"
                                class="button danger small"
                                data-testid="discard-queue"
                                on:click=move |ev| {
                                    if !crate::components::confirm(&question) {
                                        ev.prevent_default();
                                    }
                                }
                            >
                                {label}
                            </button>
                        </ActionForm>
                    }
                }))}
                <p class="muted small">
                    "Paused endpoints keep queueing; Resume sends what waited. A delivery whose retry window passes while paused expires."
                </p>
            </section>
            <section class="card">
                <h2>"Settings"</h2>
                {allowed(|m| m.can_change).then(|| view! {
                    <p>
                        <a href=edit_href class="button secondary small" data-testid="edit">"Edit"</a>
                    </p>
                })}
                <dl class="headers">
                    <dt>"Event types"</dt>
                    <dd>{types}</dd>
                    <dt>"Rate limit"</dt>
                    <dd>{limit}</dd>
                    <dt>"Max in flight"</dt>
                    <dd data-testid="in-flight-cap">{cap}</dd>
                </dl>
                {allowed(|m| m.can_see_secrets).then(|| view! {
                    <Secret id=id_secret rotate=actions.rotate previous_until=d.previous_secret_until />
                })}
                {allowed(|m| m.can_change).then(|| view! { <DeleteEndpointForm id=id_delete /> })}
            </section>
        </div>
    }
}

#[component]
fn Tile(label: &'static str, value: String, sub: String, testid: &'static str) -> impl IntoView {
    view! {
        <div class="tile card">
            <div class="tile-label">{label}</div>
            <div class="tile-value" data-testid=testid>{value}</div>
            <div class="muted small">{sub}</div>
        </div>
    }
}

/// The signing secret stays hidden until asked for; rotating keeps the old
/// one signing alongside for a day.
#[component]
fn Secret(
    id: String,
    rotate: ServerAction<RotateSecret>,
    previous_until: Option<i64>,
) -> impl IntoView {
    let reveal = ServerAction::<RevealSecret>::new();
    let shown = move || match reveal.value().get() {
        Some(Ok(secret)) => {
            Some(view! { <code class="secret" data-testid="secret">{secret}</code> }.into_any())
        }
        Some(Err(e)) => Some(view! { <ErrorNotice error=e /> }.into_any()),
        None => None,
    };
    let hide_id = id.clone();
    view! {
        <h3>"Signing secret"</h3>
        <div class="actions">
            <ActionForm action=reveal>
                <input type="hidden" name="id" value=id.clone() />
                <button type="submit" class="button secondary small" data-testid="reveal">"Reveal"</button>
            </ActionForm>
            <ActionForm action=rotate>
                <input type="hidden" name="id" value=hide_id />
                <button type="submit" class="button secondary small" data-testid="rotate">"Rotate"</button>
            </ActionForm>
        </div>
        {shown}
        {previous_until.map(|until| view! {
            <p class="muted small">"The previous secret also signs until " <Time ms=until /> "."</p>
        })}
    }
}

#[component]
fn DeleteEndpointForm(id: String) -> impl IntoView {
    let delete = ServerAction::<DeleteEndpoint>::new();
    view! {
        <h3>"Delete"</h3>
        <crate::components::ask_first::AskFirst
            label="Delete endpoint and its deliveries"
            question="Delete this endpoint and all its deliveries? This cannot be undone."
            testid="delete"
        >
            <ActionForm action=delete>
                <input type="hidden" name="id" value=id />
                <button type="submit" class="button danger small" data-testid="delete-confirm">
                    "Yes, delete it"
                </button>
            </ActionForm>
        </crate::components::ask_first::AskFirst>
    }
}
