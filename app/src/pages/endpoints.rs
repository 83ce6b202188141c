//! The endpoints list with health at a glance, and the form to add one.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::{
    api::endpoints::{list_endpoints, CreateEndpoint},
    components::{
        endpoint_fields::{refused, EndpointFields},
        layout::{allowed, ErrorNotice, Layout},
        time::Time,
    },
    model::endpoints::{Condition, EndpointForm, EndpointSummary},
};

#[component]
pub fn EndpointsPage() -> impl IntoView {
    let create = ServerAction::<CreateEndpoint>::new();
    let list = Resource::new(move || create.version().get(), |_| list_endpoints());
    view! {
        <Title text="Endpoints" />
        <Layout>
            <div class="page-head">
                <h1>"Endpoints"</h1>
            </div>
            <Transition fallback=|| view! { <p class="muted">"Loading endpoints…"</p> }>
                {move || Suspend::new(async move {
                    match list.await {
                        Ok(list) if list.is_empty() => view! {
                            <section class="card empty-state">
                                <h2>"No endpoints yet"</h2>
                                <p>"Add the URL that should receive your events below."</p>
                            </section>
                        }
                        .into_any(),
                        Ok(list) => view! { <EndpointTable list /> }.into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Transition>
            {allowed(|m| m.can_change).then(|| view! { <CreateForm create /> })}
        </Layout>
    }
}

#[component]
fn EndpointTable(list: Vec<EndpointSummary>) -> impl IntoView {
    view! {
        <table class="table" data-testid="endpoints-table">
            <thead>
                <tr>
                    <th>"Endpoint"</th>
                    <th>"Event types"</th>
                    <th>"State"</th>
                    <th>"Success (24 h)"</th>
                    <th>"Last attempt"</th>
                </tr>
            </thead>
            <tbody>
                {list.into_iter().map(|e| view! { <EndpointRow e /> }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn EndpointRow(e: EndpointSummary) -> impl IntoView {
    let rate = match e.success_rate_24h() {
        Some(p) => format!("{p}% of {}", e.attempts_24h),
        None => "no attempts".to_string(),
    };
    let types = if e.event_types.is_empty() {
        "all events".to_string()
    } else {
        e.event_types.join(", ")
    };
    let last = match &e.last_attempt {
        Some(l) => {
            let status = l
                .status
                .map_or_else(|| "no response".to_string(), |s| s.to_string());
            let class = if l.delivered {
                "status ok"
            } else {
                "status bad"
            };
            view! {
                <span class=class>{status}</span>
                " "
                <span class="muted small"><Time ms=l.at /></span>
            }
            .into_any()
        }
        None => view! { <span class="muted small">"never"</span> }.into_any(),
    };
    view! {
        <tr data-testid="endpoint-row">
            <td data-label="Endpoint">
                <a href=format!("/endpoints/{}", e.id) class="endpoint-url">{e.url.clone()}</a>
                <div class="muted small">{e.description.clone()}</div>
            </td>
            <td class="small" data-label="Event types">{types}</td>
            <td data-label="State">
                <ConditionBadge condition=e.condition.clone() />
            </td>
            <td data-testid="success-24h" data-label="Success (24 h)">{rate}</td>
            <td data-label="Last attempt">{last}</td>
        </tr>
    }
}

/// The state badge and, where it helps, why and since when.
#[component]
pub fn ConditionBadge(condition: Condition) -> impl IntoView {
    let detail = match &condition {
        Condition::Paused { reason } => reason.clone().map(|r| r.into_any()),
        Condition::Failing { since } => {
            Some(view! { "failing since " <Time ms=*since /> }.into_any())
        }
        Condition::CircuitOpen { until } => {
            Some(view! { "no attempts until " <Time ms=*until /> }.into_any())
        }
        Condition::Healthy | Condition::Disabled => None,
    };
    view! {
        <span class=condition.class() data-testid="endpoint-state">{condition.label()}</span>
        {detail.map(|d| view! { <div class="muted small" data-testid="endpoint-state-detail">{d}</div> })}
    }
}

#[component]
fn CreateForm(create: ServerAction<CreateEndpoint>) -> impl IntoView {
    let error = move || match create.value().get() {
        Some(Err(e)) => Some(view! { <ErrorNotice error=e /> }),
        _ => None,
    };
    view! {
        <section class="card create-endpoint">
            <h2>"Add an endpoint"</h2>
            {error}
            <ActionForm action=create attr:class="form-grid">
                <EndpointFields start=EndpointForm::default() refused=refused(create.value()) prefix="new" />
                <div>
                    <button type="submit" class="button primary">"Add endpoint"</button>
                </div>
            </ActionForm>
        </section>
    }
}
