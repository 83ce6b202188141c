//! Bulk replay: criteria → preview (a GET form, so the URL can be shared
//! and it works without JavaScript) → confirm → live progress with cancel.

use std::time::Duration;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::{
    api::admin::{replay_preview, replay_status, ReplayCancel, ReplayStart},
    components::{
        layout::{ErrorNotice, Layout},
        time::Time,
    },
    model::admin::{ReplayForm, ReplayView},
};

#[component]
pub fn ReplayPage() -> impl IntoView {
    let query = use_query_map();
    let form = Memo::new(move |_| {
        let q = query.read();
        let text = |k: &str| q.get(k).unwrap_or_default();
        ReplayForm {
            failed: q.get("failed"),
            expired: q.get("expired"),
            pending: q.get("pending"),
            since: text("since"),
            until: text("until"),
            account_id: text("account_id"),
            endpoint_id: text("endpoint_id"),
            event_type: text("event_type"),
            window: text("window"),
        }
    });
    let preview = Resource::new(
        move || form.get(),
        |f| async move {
            if f.is_empty() {
                Ok(None)
            } else {
                replay_preview(f).await.map(Some)
            }
        },
    );
    let start = ServerAction::<ReplayStart>::new();
    view! {
        <Title text="Bulk replay" />
        <Layout>
            <p class="crumbs"><a href="/admin">"← Admin"</a></p>
            <h1>"Bulk replay"</h1>
            <CriteriaForm form=form.get_untracked() />
            <Suspense fallback=|| view! { <p class="muted">"Counting…"</p> }>
                {move || Suspend::new(async move {
                    let f = form.get_untracked();
                    match preview.await {
                        Ok(None) => view! { <p class="muted">"Choose what to replay, then preview it: nothing changes until you confirm."</p> }.into_any(),
                        Ok(Some(lines)) => {
                            let total: i64 = lines.iter().map(|l| l.count).sum();
                            view! {
                                <section class="card" data-testid="preview">
                                    <h2 data-testid="preview-total">{format!("{total} deliveries match")}</h2>
                                    <table class="table small">
                                        <thead><tr><th>"Account"</th><th>"Endpoint"</th><th>"Deliveries"</th></tr></thead>
                                        <tbody>
                                            {lines
                                                .into_iter()
                                                .map(|l| view! {
                                                    <tr data-testid="preview-row">
                                                        <td data-label="Account">{l.account_name}</td>
                                                        <td data-label="Endpoint"><code>{l.endpoint_url}</code></td>
                                                        <td data-label="Deliveries">{l.count}</td>
                                                    </tr>
                                                })
                                                .collect_view()}
                                        </tbody>
                                    </table>
                                    {(total > 0).then(|| view! { <ConfirmForm form=f start /> })}
                                </section>
                            }
                            .into_any()
                        }
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Suspense>
        </Layout>
    }
}

#[component]
fn CriteriaForm(form: ReplayForm) -> impl IntoView {
    view! {
        <form class="card form-grid" method="get" action="/admin/replay">
            <fieldset class="states">
                <legend>"States"</legend>
                <label class="check"><input type="checkbox" name="failed" checked=form.failed.is_some() />" failed"</label>
                <label class="check"><input type="checkbox" name="expired" checked=form.expired.is_some() />" expired"</label>
                <label class="check"><input type="checkbox" name="pending" checked=form.pending.is_some() />" waiting (a fresh retry window)"</label>
            </fieldset>
            <label>"Created from (UTC day)"<input type="date" name="since" value=form.since /></label>
            <label>"Created until (UTC day)"<input type="date" name="until" value=form.until /></label>
            <label>"Account id"<input name="account_id" value=form.account_id placeholder="any" /></label>
            <label>"Endpoint id"<input name="endpoint_id" value=form.endpoint_id placeholder="any" /></label>
            <label>"Event type"<input name="event_type" value=form.event_type placeholder="any" /></label>
            <label>"Spread over"<input name="window" value=form.window placeholder="5m" /></label>
            <div><button type="submit" class="button secondary">"Preview"</button></div>
        </form>
    }
}

#[component]
fn ConfirmForm(form: ReplayForm, start: ServerAction<ReplayStart>) -> impl IntoView {
    let hidden = |name: &'static str, value: String| view! { <input type="hidden" name=format!("form[{name}]") value=value /> };
    let error = move || match start.value().get() {
        Some(Err(e)) => Some(view! { <ErrorNotice error=e /> }),
        _ => None,
    };
    view! {
        <ActionForm action=start>
            {form.failed.map(|v| hidden("failed", v))}
            {form.expired.map(|v| hidden("expired", v))}
            {form.pending.map(|v| hidden("pending", v))}
            {hidden("since", form.since)}
            {hidden("until", form.until)}
            {hidden("account_id", form.account_id)}
            {hidden("endpoint_id", form.endpoint_id)}
            {hidden("event_type", form.event_type)}
            {hidden("window", form.window)}
            <button type="submit" class="button primary" data-testid="confirm">"Replay these deliveries"</button>
        </ActionForm>
        {error}
    }
}

#[component]
pub fn ReplayProgressPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let refresh = RwSignal::new(0u32);
    let cancel = ServerAction::<ReplayCancel>::new();
    let status = Resource::new(
        move || (id(), refresh.get(), cancel.version().get()),
        |(id, _, _)| replay_status(id),
    );
    Effect::new(move |_| {
        let poll = set_interval_with_handle(
            move || {
                if status
                    .get_untracked()
                    .and_then(Result::ok)
                    .is_some_and(|s| s.is_active())
                {
                    refresh.update(|n| *n = n.wrapping_add(1));
                }
            },
            Duration::from_millis(1500),
        )
        .ok();
        on_cleanup(move || {
            if let Some(h) = poll {
                h.clear();
            }
        });
    });
    view! {
        <Title text="Replay" />
        <Layout>
            <p class="crumbs"><a href="/admin/audit">"← Audit log"</a></p>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match status.await {
                        Ok(r) => view! { <Progress r cancel /> }.into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Transition>
        </Layout>
    }
}

#[component]
fn Progress(r: ReplayView, cancel: ServerAction<ReplayCancel>) -> impl IntoView {
    let done = r.delivered + r.failed + r.expired;
    let percent = if r.count > 0 {
        done * 100 / r.count
    } else {
        100
    };
    let running = r.status == "running" && r.pending + r.in_flight > 0;
    view! {
        <h1>{format!("Replay of {} deliveries", r.count)}</h1>
        <p class="muted">
            "Started " <Time ms=r.created_at /> " by " <code>{r.actor.clone()}</code>
            " · " <span data-testid="replay-status">{r.status.clone()}</span>
        </p>
        <div class="progress" role="progressbar" aria-valuenow=percent aria-valuemin="0" aria-valuemax="100">
            <div class="progress-bar" style=format!("width: {percent}%")></div>
        </div>
        <div class="tiles">
            <Count label="Delivered" n=r.delivered testid="replay-delivered" />
            <Count label="Waiting" n=r.pending testid="replay-pending" />
            <Count label="In flight" n=r.in_flight testid="replay-in-flight" />
            <Count label="Failed" n=r.failed testid="replay-failed" />
            <Count label="Expired" n=r.expired testid="replay-expired" />
        </div>
        <p class="muted small"><code>{r.criteria.clone()}</code></p>
        {running.then(|| view! {
            <ActionForm action=cancel>
                <input type="hidden" name="id" value=r.id.clone() />
                <button type="submit" class="button danger" data-testid="cancel">"Cancel: return what has not been tried"</button>
            </ActionForm>
        })}
    }
}

#[component]
fn Count(label: &'static str, n: i64, testid: &'static str) -> impl IntoView {
    view! {
        <div class="tile card">
            <div class="tile-label">{label}</div>
            <div class="tile-value" data-testid=testid>{n}</div>
        </div>
    }
}
