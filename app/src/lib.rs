//! Dakghar's dashboard: the Leptos app rendered on the server and hydrated
//! in the browser, its server functions, and the types both sides share.
#![forbid(unsafe_code)]

pub mod api;
pub mod components;
pub mod error;
pub mod format;
pub mod json_text;
pub mod model;
pub mod pages;
#[cfg(feature = "ssr")]
pub mod port;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Title};
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
    endpoint_edit::EndpointEditPage,
    endpoint_recover::EndpointRecoverPage,
    endpoints::EndpointsPage,
    event_detail::EventDetailPage,
    events::EventsPage,
    login::LoginPage,
    not_found::NotFound,
    notifications::NotificationsPage,
    password::{ForgotPasswordPage, InvitationPage, ResetPasswordPage},
    team::TeamPage,
};

/// The HTML document around the app; rendered on the server only. The
/// brand travels on `<body>`: its accent as the `--accent` variable, its
/// name and logo as data the browser's hydration reads back.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    let brand = components::layout::brand();
    let accent = brand.accent.as_ref().map(|a| format!("--accent: {a}"));
    // Beside the scripts, under the bundle's versioned folder.
    let css = format!("/{}/dakghar.css", options.site_pkg_dir);
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <link rel="icon" type="image/svg+xml" href="/favicon.svg" />
                <AutoReload options=options.clone() />
                <link rel="stylesheet" href=css />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body
                style=accent
                data-brand-name=brand.name
                data-brand-accent=brand.accent
                data-brand-logo=brand.logo
            >
                <App />
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    let brand = components::layout::brand();
    // Async SSR: every page arrives complete, so it works with JavaScript off.
    view! {
        <Title formatter=move |page: String| format!("{page} · {}", brand.name) />
        <Router>
            <Routes fallback=NotFound>
                <Route path=path!("/login") view=LoginPage ssr=SsrMode::Async />
                <Route path=path!("/events") view=EventsPage ssr=SsrMode::Async />
                <Route path=path!("/events/:id") view=EventDetailPage ssr=SsrMode::Async />
                <Route path=path!("/endpoints") view=EndpointsPage ssr=SsrMode::Async />
                <Route path=path!("/endpoints/:id") view=EndpointDetailPage ssr=SsrMode::Async />
                <Route path=path!("/endpoints/:id/edit") view=EndpointEditPage ssr=SsrMode::Async />
                <Route path=path!("/endpoints/:id/recover") view=EndpointRecoverPage ssr=SsrMode::Async />
                <Route path=path!("/notifications") view=NotificationsPage ssr=SsrMode::Async />
                <Route path=path!("/api-keys") view=ApiKeysPage ssr=SsrMode::Async />
                <Route path=path!("/docs") view=DocsPage ssr=SsrMode::Async />
                <Route path=path!("/admin") view=AdminPage ssr=SsrMode::Async />
                <Route path=path!("/admin/replay") view=ReplayPage ssr=SsrMode::Async />
                <Route path=path!("/admin/replays/:id") view=ReplayProgressPage ssr=SsrMode::Async />
                <Route path=path!("/admin/audit") view=AuditPage ssr=SsrMode::Async />
                <Route path=path!("/team") view=TeamPage ssr=SsrMode::Async />
                <Route path=path!("/forgot-password") view=ForgotPasswordPage ssr=SsrMode::Async />
                <Route path=path!("/reset-password/:token") view=ResetPasswordPage ssr=SsrMode::Async />
                <Route path=path!("/invitations/:token") view=InvitationPage ssr=SsrMode::Async />
            </Routes>
        </Router>
    }
}

/// The brand the server's render left on `<body>`.
#[cfg(feature = "hydrate")]
fn brand_on_page() -> model::Brand {
    let body = document().body();
    let data = |name: &str| body.as_ref().and_then(|b| b.get_attribute(name));
    model::Brand {
        name: data("data-brand-name").unwrap_or_else(|| model::Brand::default().name),
        accent: data("data-brand-accent"),
        logo: data("data-brand-logo"),
    }
}

#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    let brand = brand_on_page();
    leptos::mount::hydrate_body(move || {
        provide_context(brand);
        view! { <App /> }
    });
    // Lets end-to-end tests tell a hydrated page from a server-rendered one.
    if let Some(body) = document().body() {
        let _ = body.set_attribute("data-hydrated", "true");
    }
}
