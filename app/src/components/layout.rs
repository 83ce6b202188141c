//! The frame around every signed-in page: navigation, account, sign out.

use leptos::prelude::*;
use leptos_router::components::A;

use crate::{api::me::get_me, error::AppError, model::Me};

#[component]
pub fn Layout(children: ChildrenFn) -> impl IntoView {
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <header class="topbar">
            <a class="brand" href="/events">
                "Dakghar"
            </a>
            <nav aria-label="Main">
                <A href="/events">"Events"</A>
                <A href="/endpoints">"Endpoints"</A>
                <A href="/notifications">"Notifications"</A>
                <A href="/api-keys">"API keys"</A>
                <A href="/docs">"Docs"</A>
                // A convenience only: the server checks the role on every admin call.
                <Suspense fallback=|| ()>
                    {move || Suspend::new(async move {
                        me.await
                            .ok()
                            .filter(|m| m.is_admin)
                            .map(|_| view! { <A href="/admin">"Admin"</A> })
                    })}
                </Suspense>
            </nav>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move { me.await.map(|me| view! { <Account me /> }) })}
            </Suspense>
        </header>
        <main class="page">
            <Suspense fallback=|| ()>
                {move || {
                    let children = children.clone();
                    Suspend::new(async move {
                        match me.await {
                            Ok(_) => children().into_any(),
                            Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                        }
                    })
                }}
            </Suspense>
        </main>
    }
}

#[component]
fn Account(me: Me) -> impl IntoView {
    view! {
        <div class="account">
            <span class="account-name" data-testid="account-name">
                {me.account_name}
            </span>
            <span class="email" data-testid="user-email">
                {me.email}
            </span>
            <form method="post" action="/logout">
                <button type="submit" class="button secondary">
                    "Log out"
                </button>
            </form>
        </div>
    }
}

#[component]
pub fn ErrorNotice(error: AppError) -> impl IntoView {
    view! {
        <p class="notice error" role="alert">
            {error.to_string()}
        </p>
    }
}
