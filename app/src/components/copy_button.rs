//! "Copy" next to a block of text. It needs the browser's clipboard, so
//! without JavaScript it is simply absent and the text stays selectable.

use leptos::prelude::*;

#[component]
pub fn CopyButton(text: String, #[prop(into)] label: String) -> impl IntoView {
    let copied = RwSignal::new(false);
    let hydrated = super::hydrated();
    let click = move |_| {
        copy_to_clipboard(&text);
        copied.set(true);
    };
    view! {
        <Show when=move || hydrated.get()>
            <button type="button" class="button small secondary copy" on:click=click.clone()>
                {
                    let label = label.clone();
                    move || if copied.get() { "Copied".to_string() } else { label.clone() }
                }
            </button>
        </Show>
    }
}

#[cfg(feature = "hydrate")]
pub fn copy_to_clipboard(text: &str) {
    let clipboard = window().navigator().clipboard();
    let _ = clipboard.write_text(text);
}

#[cfg(not(feature = "hydrate"))]
pub fn copy_to_clipboard(_text: &str) {}
