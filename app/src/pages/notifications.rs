//! The account's alert emails, newest first, as they sit in the outbox.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::{
    api::account::list_notifications,
    components::{
        layout::{ErrorNotice, Layout},
        time::Time,
    },
};

#[component]
pub fn NotificationsPage() -> impl IntoView {
    let list = Resource::new(|| (), |_| list_notifications());
    view! {
        <Title text="Notifications" />
        <Layout>
            <h1>"Notifications"</h1>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match list.await {
                        Ok(list) if list.is_empty() => view! {
                            <section class="card empty-state">
                                <h2>"Nothing to report"</h2>
                                <p>"When an endpoint is paused or keeps failing, the email we send appears here too."</p>
                            </section>
                        }
                        .into_any(),
                        Ok(list) => list
                            .into_iter()
                            .map(|n| {
                                let sent = match n.sent_at {
                                    None => "not emailed yet".into_any(),
                                    Some(t) => view! { "emailed " <Time ms=t /> }.into_any(),
                                };
                                view! {
                                    <article class="card notification" data-testid="notification">
                                        <div class="card-head">
                                            <h2>{n.subject}</h2>
                                            <span class="muted small"><Time ms=n.created_at /></span>
                                        </div>
                                        <p>{n.body}</p>
                                        <p class="muted small">
                                            {sent}
                                            {n.endpoint_id.map(|id| view! {
                                                " · " <a href=format!("/endpoints/{id}")>"the endpoint"</a>
                                            })}
                                        </p>
                                    </article>
                                }
                            })
                            .collect_view()
                            .into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Suspense>
        </Layout>
    }
}
