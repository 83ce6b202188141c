//! The frame around every signed-in page: the brand, navigation (what the
//! viewer's role may open), the account, sign out, and for a portal
//! session the way back to the platform.

use leptos::prelude::*;
use leptos_router::components::A;

use crate::{
    api::me::get_me,
    error::AppError,
    model::{Brand, Me},
};

/// The installation's brand, from the server's render or, after
/// hydration, from what that render left on the page.
pub fn brand() -> Brand {
    use_context::<Brand>().unwrap_or_default()
}

/// Whether the signed-in viewer may do what `check` asks, for leaving out
/// buttons that would be refused (the server checks every call anyway).
pub fn allowed(check: impl Fn(&Me) -> bool) -> bool {
    use_context::<Me>().is_some_and(|me| check(&me))
}

#[component]
pub fn Layout(children: ChildrenFn) -> impl IntoView {
    let me = Resource::new(|| (), |_| get_me());
    let brand = brand();
    view! {
        <header class="topbar">
            <a class="brand" href="/events">
                {brand.logo.map(|src| view! { <img class="logo" src=src alt="" /> })}
                {brand.name}
            </a>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move { me.await.ok().map(|me| view! { <Nav me /> }) })}
            </Suspense>
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
                            Ok(me) => {
                                provide_context(me);
                                children().into_any()
                            }
                            Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                        }
                    })
                }}
            </Suspense>
        </main>
    }
}

#[component]
fn Nav(me: Me) -> impl IntoView {
    view! {
        <nav aria-label="Main">
            <A href="/events">"Events"</A>
            <A href="/endpoints">"Endpoints"</A>
            <A href="/notifications">"Notifications"</A>
            {me.can_manage_keys.then(|| view! { <A href="/api-keys">"API keys"</A> })}
            {me.can_manage_team.then(|| view! { <A href="/team">"Team"</A> })}
            <A href="/docs">"Docs"</A>
            // A convenience only: the server checks the role on every admin call.
            {me.is_admin.then(|| view! { <A href="/admin">"Admin"</A> })}
        </nav>
    }
}

#[component]
fn Account(me: Me) -> impl IntoView {
    let who = if me.portal {
        format!("Portal · {}", me.role.as_str())
    } else {
        me.email.clone()
    };
    view! {
        <div class="account">
            {me.back.map(|(url, host)| view! {
                <a class="button secondary small" href=url data-testid="back-to-platform">
                    {format!("Back to {host}")}
                </a>
            })}
            <span class="account-name" data-testid="account-name">
                {me.account_name}
            </span>
            <span class="email" data-testid="user-email">
                {who}
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
    // A session that ran out: the way back in, to this same page.
    let sign_in = matches!(error, AppError::Unauthorized).then(|| {
        let here = leptos_router::hooks::use_location();
        let next = format!(
            "{}{}",
            here.pathname.get_untracked(),
            here.search.get_untracked()
        );
        view! {
            " "
            <a href=format!("/login?next={}", crate::format::path_segment(&next))>"Sign in"</a>
        }
    });
    view! {
        <p class="notice error" role="alert">
            {error.to_string()}
            {sign_in}
        </p>
    }
}
