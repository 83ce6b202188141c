//! A destructive button that asks first, with or without JavaScript: the
//! first click only opens the question (a `<details>`), the form inside
//! does the deed.

use leptos::prelude::*;

/// `testid` marks the opening button; the form's own button should carry
/// `{testid}-confirm`.
#[component]
pub fn AskFirst(
    label: &'static str,
    #[prop(into)] question: String,
    testid: &'static str,
    children: Children,
) -> impl IntoView {
    view! {
        <details class="ask-first">
            <summary class="button danger small" data-testid=testid>{label}</summary>
            <div class="ask-first-body" role="group" aria-label=label>
                <p class="small">{question}</p>
                {children()}
            </div>
        </details>
    }
}
