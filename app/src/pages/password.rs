//! The pages behind single-use links and "Forgot password?": plain forms
//! posting to the server (which answers with a redirect back here and a
//! word in the query), so they work with JavaScript off.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::{components::layout::brand, model::MIN_PASSWORD_CHARS};

/// What the query's code says went wrong, in words. Only the codes the
/// server sends: a link must not put words of its own on this page.
fn problem(error: Option<String>, wait: Option<String>) -> Option<String> {
    Some(match error?.as_str() {
        "unusable" => "This link was used or has expired. Ask for a new one.".to_string(),
        "throttled" => format!(
            "Too many requests for this email. Try again in {} seconds.",
            wait.filter(|w| w.bytes().all(|b| b.is_ascii_digit()))
                .unwrap_or_else(|| "a few".into())
        ),
        "short" => {
            format!("The password is too short: use at least {MIN_PASSWORD_CHARS} characters.")
        }
        "long" => "The password is too long.".to_string(),
        "taken" => "This email has a user already: sign in instead.".to_string(),
        "unavailable" => "Something went wrong on our side; try again in a moment.".to_string(),
        _ => return None,
    })
}

#[component]
fn Problem() -> impl IntoView {
    let query = use_query_map();
    move || {
        let q = query.read();
        problem(q.get("error"), q.get("wait")).map(|text| {
            view! {
                <p class="notice error" role="alert">
                    {text}
                </p>
            }
        })
    }
}

#[component]
fn PasswordField() -> impl IntoView {
    view! {
        <label for="password">"New password"</label>
        <input
            id="password"
            name="password"
            type="password"
            autocomplete="new-password"
            minlength=MIN_PASSWORD_CHARS
            required
        />
        <p class="muted small">
            {format!("At least {MIN_PASSWORD_CHARS} characters; a passphrase is welcome.")}
        </p>
    }
}

#[component]
pub fn ForgotPasswordPage() -> impl IntoView {
    let query = use_query_map();
    let sent = move || query.read().get("sent").is_some();
    view! {
        <Title text="Forgot password" />
        <main class="login">
            <form class="card login-card" method="post" action="/forgot-password">
                <h1>"Forgot your password?"</h1>
                <Show when=sent>
                    <p class="notice ok" role="status" data-testid="reset-sent">
                        "If that email has an account, a link to choose a new password is on its way. It works once, for 30 minutes."
                    </p>
                </Show>
                <Problem />
                <label for="email">"Email"</label>
                <input id="email" name="email" type="email" autocomplete="username" required />
                <button type="submit" class="button primary">
                    "Send a reset link"
                </button>
                <p class="muted small">
                    <a href="/login">"Back to sign in"</a>
                </p>
            </form>
        </main>
    }
}

#[component]
pub fn ResetPasswordPage() -> impl IntoView {
    let params = use_params_map();
    let action = move || {
        format!(
            "/reset-password/{}",
            params.read().get("token").unwrap_or_default()
        )
    };
    view! {
        <Title text="Choose a new password" />
        <main class="login">
            <form class="card login-card" method="post" action=action>
                <h1>"Choose a new password"</h1>
                <Problem />
                <PasswordField />
                <p class="muted small">"Every other session of yours is signed out."</p>
                <button type="submit" class="button primary">
                    "Set password"
                </button>
            </form>
        </main>
    }
}

#[component]
pub fn InvitationPage() -> impl IntoView {
    let params = use_params_map();
    let action = move || {
        format!(
            "/invitations/{}",
            params.read().get("token").unwrap_or_default()
        )
    };
    let name = brand().name;
    view! {
        <Title text="Accept the invitation" />
        <main class="login">
            <form class="card login-card" method="post" action=action>
                <h1>{format!("Join your team on {name}")}</h1>
                <Problem />
                <PasswordField />
                <button type="submit" class="button primary">
                    "Accept and sign in"
                </button>
            </form>
        </main>
    }
}
