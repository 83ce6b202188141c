//! The answer to "Create key": the whole key, shown this once with a way
//! to copy it, or why it was not made.

use leptos::prelude::*;

use super::{copy_button::CopyButton, layout::ErrorNotice};
use crate::error::AppError;

#[component]
pub fn NewKey(
    /// The create action's answer, `None` until it is called.
    answer: Signal<Option<Result<String, AppError>>>,
    /// What the key is, opening the notice ("Your new key").
    what: &'static str,
    testid: &'static str,
) -> impl IntoView {
    move || match answer.get() {
        Some(Ok(key)) => Some(
            view! {
                <div class="notice ok" data-testid=testid>
                    <p>{what} ". Copy it now: it is shown only this once."</p>
                    <code class="secret">{key.clone()}</code>
                    <CopyButton text=key label="Copy key" />
                </div>
            }
            .into_any(),
        ),
        Some(Err(e)) => Some(view! { <ErrorNotice error=e /> }.into_any()),
        None => None,
    }
}
