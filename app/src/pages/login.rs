//! Sign in. A real form post to `/login`, so it works with JavaScript off.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::components::layout::brand;

#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let error = move || query.read().get("error");
    let failed = move || error().is_some_and(|e| e != "throttled");
    let throttled = move || error().is_some_and(|e| e == "throttled");
    let wait = move || query.read().get("wait").unwrap_or_else(|| "a few".into());
    let next = move || query.read().get("next").unwrap_or_default();
    let reset = move || query.read().get("reset").is_some();
    let name = brand().name;
    view! {
        <Title text="Sign in" />
        <main class="login">
            <form class="card login-card" method="post" action="/login">
                <h1>{format!("Sign in to {name}")}</h1>
                <Show when=reset>
                    <p class="notice ok" role="status" data-testid="password-changed">
                        "Your password is changed and your other sessions are signed out. Sign in with the new one."
                    </p>
                </Show>
                <Show when=failed>
                    <p class="notice error" role="alert">
                        "Invalid email or password."
                    </p>
                </Show>
                <Show when=throttled>
                    <p class="notice error" role="alert">
                        "Too many failed sign-ins for this email. Try again in "
                        {wait}
                        " seconds."
                    </p>
                </Show>
                <label for="email">"Email"</label>
                <input id="email" name="email" type="email" autocomplete="username" required />
                <label for="password">"Password"</label>
                <input
                    id="password"
                    name="password"
                    type="password"
                    autocomplete="current-password"
                    required
                />
                <input type="hidden" name="next" value=next />
                <button type="submit" class="button primary">
                    "Sign in"
                </button>
                <p class="muted small">
                    <a href="/forgot-password">"Forgot password?"</a>
                </p>
            </form>
        </main>
    }
}
