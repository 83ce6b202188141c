//! Dakghar's dashboard: the Leptos app rendered on the server and hydrated
//! in the browser, its server functions, and the types both sides share.
#![forbid(unsafe_code)]

pub mod api;
pub mod components;
pub mod error;
pub mod format;
pub mod model;
pub mod pages;
#[cfg(feature = "ssr")]
pub mod port;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    path, SsrMode,
};

use crate::pages::{
    admin::{AdminPage, AuditPage},
    admin_replay::{ReplayPage, ReplayProgressPage},
    api_keys::ApiKeysPage,
    docs::DocsPage,
    endpoint_detail::EndpointDetailPage,
    endpoints::EndpointsPage,
    event_detail::EventDetailPage,
    events::EventsPage,
    login::LoginPage,
    not_found::NotFound,
    notifications::NotificationsPage,
};

/// The HTML document around the app; rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <link rel="icon" type="image/svg+xml" href="/favicon.svg" />
                <AutoReload options=options.clone() />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Async SSR: every page arrives complete, so it works with JavaScript off.
    view! {
        <Stylesheet id="leptos" href="/pkg/dakghar.css" />
        <Title formatter=|page: String| format!("{page} · Dakghar") />
        <Router>
            <Routes fallback=NotFound>
                <Route path=path!("/login") view=LoginPage ssr=SsrMode::Async />
                <Route path=path!("/events") view=EventsPage ssr=SsrMode::Async />
                <Route path=path!("/events/:id") view=EventDetailPage ssr=SsrMode::Async />
                <Route path=path!("/endpoints") view=EndpointsPage ssr=SsrMode::Async />
                <Route path=path!("/endpoints/:id") view=EndpointDetailPage ssr=SsrMode::Async />
                <Route path=path!("/notifications") view=NotificationsPage ssr=SsrMode::Async />
                <Route path=path!("/api-keys") view=ApiKeysPage ssr=SsrMode::Async />
                <Route path=path!("/docs") view=DocsPage ssr=SsrMode::Async />
                <Route path=path!("/admin") view=AdminPage ssr=SsrMode::Async />
                <Route path=path!("/admin/replay") view=ReplayPage ssr=SsrMode::Async />
                <Route path=path!("/admin/replays/:id") view=ReplayProgressPage ssr=SsrMode::Async />
                <Route path=path!("/admin/audit") view=AuditPage ssr=SsrMode::Async />
            </Routes>
        </Router>
    }
}

#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(App);
    // Lets end-to-end tests tell a hydrated page from a server-rendered one.
    if let Some(body) = document().body() {
        let _ = body.set_attribute("data-hydrated", "true");
    }
}
