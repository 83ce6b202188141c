//! The events list: newest first, a badge per endpoint delivery, filters
//! that live in the URL (a plain GET form, so links share and the back
//! button works, with or without JavaScript), and cursor pages.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::{
    api::events::list_events,
    components::{
        layout::{ErrorNotice, Layout},
        time::{js_now, local_offset_minutes, Time},
    },
    format,
    model::events::{EndpointOption, EventRow, EventsList, EventsQuery, ANSWERS, RANGES, STATES},
};

#[component]
pub fn EventsPage() -> impl IntoView {
    let query = use_query_map();
    let filters = Memo::new(move |_| {
        let q = query.read();
        let get = |k: &str| {
            q.get(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        EventsQuery {
            state: get("state"),
            event_type: get("type"),
            endpoint: get("endpoint"),
            range: get("range"),
            id: get("id"),
            status: get("status"),
            from: get("from"),
            to: get("to"),
            tz: get("tz"),
            cursor: get("cursor"),
            before: get("before"),
        }
    });
    let list = Resource::new(move || filters.get(), list_events);
    view! {
        <Title text="Events" />
        <Layout>
            <div class="page-head">
                <h1>"Events"</h1>
            </div>
            <Transition fallback=|| view! { <p class="muted">"Loading events…"</p> }>
                {move || Suspend::new(async move {
                    let q = filters.get_untracked();
                    match list.await {
                        Ok(list) => view! { <EventsView q list /> }.into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Transition>
        </Layout>
    }
}

#[component]
fn EventsView(q: EventsQuery, list: EventsList) -> impl IntoView {
    let first_ever = list.rows.is_empty()
        && list.problem.is_none()
        && !q.is_filtered()
        && q.cursor.is_none()
        && q.before.is_none();
    if first_ever {
        return view! { <FirstEvent /> }.into_any();
    }
    let older = list.next_cursor.as_deref().map(|c| q.to_url(Some(c)));
    let newer = list.prev_cursor.as_deref().map(|c| q.newer_url(c));
    // The newest page is one step back when the newer page is it.
    let newest =
        (newer.is_some() && (q.cursor.is_some() || q.before.is_some())).then(|| q.to_url(None));
    let problem = list.problem.clone();
    let empty = list.rows.is_empty() && problem.is_none();
    view! {
        <Filters q=q.clone() endpoints=list.endpoints.clone() types=list.event_types.clone() />
        {problem.map(|p| view! { <p class="notice error" role="alert" data-testid="filter-problem">{p}</p> })}
        <Show when=move || empty>
            <section class="card empty-state">
                <h2>"No events match these filters"</h2>
                <p>
                    <a href="/events">"Clear the filters"</a>
                    " to see every event."
                </p>
            </section>
        </Show>
        <Show when=move || !empty>
            <table class="table events" data-testid="events-table">
                <thead>
                    <tr>
                        <th>"Event"</th>
                        <th>"Deliveries"</th>
                        <th class="time">"Created"</th>
                    </tr>
                </thead>
                <tbody>
                    {list.rows.clone().into_iter().map(|row| view! { <Row row now=list.now /> }).collect_view()}
                </tbody>
            </table>
        </Show>
        <nav class="pager" aria-label="Pages">
            {newest.map(|href| view! { <a class="button secondary" href=href>"⇤ Newest"</a> })}
            {newer.map(|href| view! { <a class="button secondary" href=href rel="prev">"← Newer events"</a> })}
            {older.map(|href| view! { <a class="button secondary" href=href rel="next">"Older events →"</a> })}
        </nav>
    }
    .into_any()
}

#[component]
fn Row(row: EventRow, now: i64) -> impl IntoView {
    let href = format!("/events/{}", format::path_segment(&row.id));
    view! {
        <tr data-testid="event-row">
            <td data-label="Event">
                <a class="event-link" href=href>
                    <span class="event-type">{row.event_type}</span>
                    <code class="event-id">{row.id}</code>
                </a>
            </td>
            <td class="badges" data-label="Deliveries">
                {row
                    .deliveries
                    .into_iter()
                    .map(|d| {
                        view! {
                            <span class=d.status.class() title=d.endpoint_url.clone()>
                                {d.status.label()}
                                <span class="badge-host">{d.endpoint_name}</span>
                            </span>
                        }
                    })
                    .collect_view()}
            </td>
            <td class="time" data-label="Created"><Time ms=row.created_at relative_to=now /></td>
        </tr>
    }
}

#[component]
fn Filters(q: EventsQuery, endpoints: Vec<EndpointOption>, types: Vec<String>) -> impl IntoView {
    let state = q.state.clone().unwrap_or_default();
    let range = q.range.clone().unwrap_or_default();
    let endpoint = q.endpoint.clone().unwrap_or_default();
    // Typed times are on the viewer's wall clock once the page runs (the
    // offset travels in the URL, so a shared link means the same times),
    // and in UTC without JavaScript.
    let asked = q.tz.as_deref().and_then(|t| t.parse::<i64>().ok());
    let offset = RwSignal::new(asked.unwrap_or(0));
    if asked.is_none() {
        Effect::new(move |_| {
            if let Some(local) = local_offset_minutes(js_now()) {
                offset.set(local);
            }
        });
    }
    let zone = move || format::zone(offset.get());
    view! {
        <form class="filters card" method="get" action="/events" role="search">
            <label>
                "State"
                <select name="state">
                    <option value="">"Any state"</option>
                    {STATES
                        .iter()
                        .map(|(v, label)| {
                            view! { <option value=*v selected=state == *v>{*label}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
            <label>
                "Event type"
                <input name="type" value=q.event_type.clone().unwrap_or_default() placeholder="invoice.paid"
                    list="event-types" autocomplete="off" />
            </label>
            <datalist id="event-types">
                {types.into_iter().map(|t| view! { <option value=t></option> }).collect_view()}
            </datalist>
            <label>
                "Endpoint"
                <select name="endpoint">
                    <option value="">"Any endpoint"</option>
                    {endpoints
                        .into_iter()
                        .map(|e| {
                            let selected = endpoint == e.id;
                            view! { <option value=e.id selected=selected>{e.url}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
            <label>
                "Time"
                <select name="range">
                    <option value="">"Any time"</option>
                    {RANGES
                        .iter()
                        .map(|(v, label)| {
                            view! { <option value=*v selected=range == *v>{*label}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
            <label>
                "Last answer"
                <input name="status" value=q.status.clone().unwrap_or_default() placeholder="500, 4xx, timeout"
                    list="answers" autocomplete="off" size="10" data-testid="status-filter" />
            </label>
            <datalist id="answers">
                {ANSWERS
                    .iter()
                    .map(|(v, label)| view! { <option value=*v label=*label></option> })
                    .collect_view()}
            </datalist>
            <label>
                "From (" {zone} ")"
                <input type="datetime-local" name="from" value=q.from.clone().unwrap_or_default() data-testid="from-filter" />
            </label>
            <label>
                "To (" {zone} ")"
                <input type="datetime-local" name="to" value=q.to.clone().unwrap_or_default() data-testid="to-filter" />
            </label>
            <input type="hidden" name="tz" value=move || offset.get().to_string() />
            <label>
                "Event id"
                <input name="id" value=q.id.clone().unwrap_or_default() placeholder="evt_…" />
            </label>
            <div class="filter-actions">
                <button type="submit" class="button primary">"Filter"</button>
                <a class="button secondary" href="/events">"Clear"</a>
            </div>
        </form>
    }
}

#[component]
fn FirstEvent() -> impl IntoView {
    view! {
        <section class="card empty-state" data-testid="first-event">
            <h2>"No events yet"</h2>
            <p>
                "Add an endpoint, create an API key, then send your first event. "
                "It shows up here with what your endpoint answered."
            </p>
            <pre><code>{FIRST_EVENT}</code></pre>
        </section>
    }
}

const FIRST_EVENT: &str = "curl -X POST http://127.0.0.1:3000/api/v1/events \\
  -H \"Authorization: Bearer $DAKGHAR_API_KEY\" \\
  -H 'content-type: application/json' \\
  -d '{\"type\": \"invoice.paid\", \"payload\": {\"id\": \"in_1\"}}'";
