//! Admin: the installation at a glance, and the audit log of every resend
//! and replay. The server refuses members whatever this page shows.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::{
    api::admin::{
        audit_log, get_admin_overview, list_platform_keys, CreatePlatformKey, RevokePlatformKey,
    },
    components::{
        layout::{allowed, ErrorNotice, Layout},
        new_key::NewKey,
        time::Time,
    },
};

fn share(rate: Option<f64>) -> String {
    rate.map_or_else(|| "—".to_string(), |r| format!("{:.1}%", r * 100.0))
}

#[component]
pub fn AdminPage() -> impl IntoView {
    let overview = Resource::new(|| (), |_| get_admin_overview());
    view! {
        <Title text="Admin" />
        <Layout>
            <div class="page-head">
                <h1>"Admin"</h1>
                <div class="actions">
                    <a class="button primary" href="/admin/replay">"Bulk replay"</a>
                    <a class="button secondary" href="/admin/audit">"Audit log"</a>
                </div>
            </div>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match overview.await {
                        Ok(o) => view! {
                            <div class="tiles">
                                <div class="tile card">
                                    <div class="tile-label">"Delivered, last hour"</div>
                                    <div class="tile-value" data-testid="delivery-rate">{share(o.delivery_rate_1h)}</div>
                                    <div class="muted small">{format!("of {} attempts", o.attempts_1h)}</div>
                                </div>
                                <div class="tile card">
                                    <div class="tile-label">"Dead-lettered, last hour"</div>
                                    <div class="tile-value" data-testid="dead-letter-rate">{share(o.dead_letter_rate_1h)}</div>
                                    <div class="muted small">{format!("of {} finished deliveries", o.finished_1h)}</div>
                                </div>
                            </div>
                            <table class="table" data-testid="accounts-table">
                                <thead>
                                    <tr><th>"Account"</th><th>"Queued"</th><th>"Dead letters"</th><th>"Failing endpoints"</th></tr>
                                </thead>
                                <tbody>
                                    {o.accounts
                                        .into_iter()
                                        .map(|a| view! {
                                            <tr data-testid="account-row">
                                                <td data-label="Account">{a.name}<div class="muted small"><code>{a.id}</code></div></td>
                                                <td data-label="Queued">{a.queued}</td>
                                                <td data-label="Dead letters">{a.dead_letters}</td>
                                                <td data-label="Failing endpoints">{a.failing_endpoints}</td>
                                            </tr>
                                        })
                                        .collect_view()}
                                </tbody>
                            </table>
                        }
                        .into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Suspense>
            {allowed(|me| me.is_admin).then(|| view! { <PlatformKeys /> })}
        </Layout>
    }
}

/// Platform keys: they act on any account, for the platform's backend.
#[component]
fn PlatformKeys() -> impl IntoView {
    let create = ServerAction::<CreatePlatformKey>::new();
    let revoke = ServerAction::<RevokePlatformKey>::new();
    let hydrated = crate::components::hydrated();
    let keys = Resource::new(
        move || (create.version().get(), revoke.version().get()),
        |_| list_platform_keys(),
    );
    view! {
        <section class="card">
            <div class="page-head">
                <h2>"Platform keys"</h2>
                <Show
                    when=move || hydrated.get()
                    fallback=|| view! {
                        <p class="muted small">"Creating a key needs JavaScript: the key is shown once, on this page."</p>
                    }
                >
                    <ActionForm action=create attr:class="inline-form">
                        <label>
                            "Name "
                            <input name="name" maxlength="100" placeholder="e.g. platform backend" />
                        </label>
                        <button type="submit" class="button primary small" data-testid="create-platform-key">
                            "Create platform key"
                        </button>
                    </ActionForm>
                </Show>
            </div>
            <p class="muted small">
                "A platform key acts on every account at /api/v1/accounts/…: onboard customers, send their events, open their portal."
            </p>
            <NewKey answer=create.value().into() what="The new platform key" testid="new-platform-key" />
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    match keys.await {
                        Ok(keys) => view! {
                            <ul class="plain">
                                {keys.into_iter().map(|k| {
                                    let id = k.id.clone();
                                    view! {
                                        <li data-testid="platform-key-row">
                                            <strong>{k.name.clone()}</strong> " "
                                            <code>{format!("{}…", k.prefix)}</code>
                                            " " <span class="muted small">"created " <Time ms=k.created_at /> ", "
                                            {match k.last_used_at {
                                                Some(t) => view! { "last used " <Time ms=t /> }.into_any(),
                                                None => view! { "never used" }.into_any(),
                                            }}
                                            </span> " "
                                            {match k.revoked_at {
                                                Some(_) => view! { <span class="badge expired">"revoked"</span> }.into_any(),
                                                None => view! {
                                                    <crate::components::ask_first::AskFirst
                                                        label="Revoke"
                                                        question="Revoke this platform key? Every call made with it is refused at once."
                                                        testid="revoke-platform-key"
                                                    >
                                                        <ActionForm action=revoke attr:class="inline">
                                                            <input type="hidden" name="id" value=id />
                                                            <button type="submit" class="button danger small" data-testid="revoke-platform-key-confirm">"Yes, revoke it"</button>
                                                        </ActionForm>
                                                    </crate::components::ask_first::AskFirst>
                                                }.into_any(),
                                            }}
                                        </li>
                                    }
                                }).collect_view()}
                            </ul>
                        }
                        .into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
pub fn AuditPage() -> impl IntoView {
    let log = Resource::new(|| (), |_| audit_log());
    view! {
        <Title text="Audit log" />
        <Layout>
            <p class="crumbs"><a href="/admin">"← Admin"</a></p>
            <h1>"Audit log"</h1>
            <p class="muted">"Every resend and bulk replay: who, what, how many, when."</p>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match log.await {
                        Ok(rows) if rows.is_empty() => view! { <p class="card muted">"Nothing has been replayed yet."</p> }.into_any(),
                        Ok(rows) => view! {
                            <table class="table" data-testid="audit-table">
                                <thead>
                                    <tr><th>"When"</th><th>"Who"</th><th>"What"</th><th>"Count"</th><th>"Status"</th></tr>
                                </thead>
                                <tbody>
                                    {rows
                                        .into_iter()
                                        .map(|r| {
                                            let what = match r.kind.as_str() {
                                                "bulk" => view! { <a href=format!("/admin/replays/{}", r.id)>"bulk replay"</a> }.into_any(),
                                                "recover" => view! { <a href=format!("/admin/replays/{}", r.id)>"recovery of an endpoint"</a> }.into_any(),
                                                _ => view! { <span>"resend"</span> }.into_any(),
                                            };
                                            view! {
                                                <tr data-testid="audit-row">
                                                    <td class="time" data-label="When"><Time ms=r.created_at /></td>
                                                    <td data-label="Who"><code>{r.actor}</code></td>
                                                    <td data-label="What">{what}<div class="muted small"><code>{r.criteria}</code></div></td>
                                                    <td data-label="Count">{r.count}</td>
                                                    <td data-label="Status">{r.status}</td>
                                                </tr>
                                            }
                                        })
                                        .collect_view()}
                                </tbody>
                            </table>
                        }
                        .into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Suspense>
        </Layout>
    }
}
