pub mod ask_first;
pub mod charts;
pub mod copy_button;
pub mod endpoint_fields;
pub mod layout;
pub mod new_key;
pub mod raw_or_pretty;
pub mod time;

/// Whether the page runs in the browser yet: false on the server and while
/// hydrating (both must render the same), true from the first effect on.
/// For what only a running page can do (copy, create a key shown once).
pub fn hydrated() -> leptos::prelude::ReadSignal<bool> {
    use leptos::prelude::*;
    let (hydrated, set) = signal(false);
    Effect::new(move |_| set.set(true));
    hydrated
}

/// Asks the browser's confirm dialog; on the server there is nobody to ask.
#[cfg(feature = "hydrate")]
pub fn confirm(message: &str) -> bool {
    leptos::prelude::window()
        .confirm_with_message(message)
        .unwrap_or(false)
}

#[cfg(not(feature = "hydrate"))]
pub fn confirm(_message: &str) -> bool {
    true
}
