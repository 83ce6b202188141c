//! Recover failed deliveries: pick a start time, see how many would go
//! again (a GET form, so it works without JavaScript), confirm.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::{
    api::endpoints::{get_endpoint, preview_recovery, Recover},
    components::{
        layout::{ErrorNotice, Layout},
        time::{local_offset_minutes, Time},
    },
    error::AppError,
    format,
    model::endpoints::{Condition, RecoverForm},
};

const DAY_MS: i64 = 24 * 3_600_000;

#[component]
pub fn EndpointRecoverPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let asked = Memo::new(move |_| {
        let q = query.read();
        RecoverForm {
            since: q.get("since").unwrap_or_default(),
            offset: q.get("offset").unwrap_or_default(),
        }
    });
    let endpoint = Resource::new(id, get_endpoint);
    let preview = Resource::new(
        move || (id(), asked.get()),
        |(id, form)| async move {
            if form.since.is_empty() {
                Ok(None)
            } else {
                preview_recovery(id, form).await.map(Some)
            }
        },
    );
    let recover = ServerAction::<Recover>::new();
    let back = move || format!("/endpoints/{}", format::path_segment(&id()));
    view! {
        <Title text="Recover failed deliveries" />
        <Layout>
            <p class="crumbs"><a href=back>"← Endpoint"</a></p>
            <h1>"Recover failed deliveries"</h1>
            <Transition fallback=|| view! { <p class="muted">"Loading the endpoint…"</p> }>
                {move || Suspend::new(async move {
                    match endpoint.await {
                        Ok(d) => {
                            let start = match d.summary.condition {
                                Condition::Failing { since } => since,
                                _ => d.now - DAY_MS,
                            };
                            view! {
                                <p>
                                    "Sends again every delivery to " <code class="endpoint-url">{d.summary.url.clone()}</code>
                                    " that failed or expired since the time you pick, spread over 5 minutes. Nothing changes until you confirm; one recovery per endpoint every 10 minutes."
                                </p>
                                <SinceForm id=d.summary.id.clone() asked=asked.get_untracked() start />
                            }
                            .into_any()
                        }
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Transition>
            <Refused recover />
            <Transition fallback=|| view! { <p class="muted">"Counting…"</p> }>
                {move || Suspend::new(async move {
                    match preview.await {
                        Ok(None) => ().into_any(),
                        Ok(Some(p)) => view! {
                            <section class="card" data-testid="recover-preview">
                                <p data-testid="recover-count">
                                    {format!(
                                        "{} to this endpoint failed or expired since ",
                                        match p.count {
                                            0 => "No delivery".to_string(),
                                            n => format::deliveries(n),
                                        }
                                    )}
                                    <Time ms=p.since />
                                    "."
                                </p>
                                {(p.count > 0).then(|| view! { <Confirm id=id() since=p.since count=p.count recover /> })}
                            </section>
                        }
                        .into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Transition>
        </Layout>
    }
    .into_any()
}

/// The start time in the viewer's zone once the page runs (the offset
/// travels with it), in UTC before.
#[component]
fn SinceForm(id: String, asked: RecoverForm, start: i64) -> impl IntoView {
    let typed = (!asked.since.is_empty()).then(|| asked.since.clone());
    let offset = RwSignal::new(asked.offset.trim().parse::<i64>().unwrap_or(0));
    if typed.is_none() {
        Effect::new(move |_| {
            if let Some(local) = local_offset_minutes(start) {
                offset.set(local);
            }
        });
    }
    let value = move || {
        typed
            .clone()
            .unwrap_or_else(|| format::datetime_local(start, offset.get()))
    };
    let zone = move || format::zone(offset.get());
    view! {
        <form class="card form-grid" method="get" action=format!("/endpoints/{}/recover", format::path_segment(&id))>
            <div class="field">
                <label for="recover-since">"Failed or expired since (" {zone} ")"</label>
                <input id="recover-since" type="datetime-local" name="since" required value=value data-testid="recover-since" />
            </div>
            <input type="hidden" name="offset" value=move || offset.get().to_string() />
            <div><button type="submit" class="button secondary" data-testid="recover-preview-button">"Preview"</button></div>
        </form>
    }
}

#[component]
fn Confirm(id: String, since: i64, count: i64, recover: ServerAction<Recover>) -> impl IntoView {
    let label = format!("Send {} again", format::deliveries(count));
    view! {
        <ActionForm action=recover>
            <input type="hidden" name="id" value=id />
            <input type="hidden" name="since" value=since.to_string() />
            <button type="submit" class="button primary" data-testid="recover-confirm">{label}</button>
        </ActionForm>
    }
}

/// A refused confirmation, whatever the preview shows now (a recovery
/// that went through leaves nothing to preview).
#[component]
fn Refused(recover: ServerAction<Recover>) -> impl IntoView {
    move || {
        match recover.value().get() {
        Some(Err(AppError::RateLimited { retry_after_s, .. })) => Some(
            view! {
                <p class="notice error" role="alert" data-testid="recover-limited">
                    {format!("One recovery per endpoint every 10 minutes. Try again in {retry_after_s} s.")}
                </p>
            }
            .into_any(),
        ),
        Some(Err(e)) => Some(view! { <ErrorNotice error=e /> }.into_any()),
        _ => None,
    }
    }
}
