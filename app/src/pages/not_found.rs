use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Not found" />
        <main class="page">
            <h1>"Page not found"</h1>
            <p>
                <a href="/events">"Back to events"</a>
            </p>
        </main>
    }
}
