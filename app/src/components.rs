pub mod ask_first;
pub mod copy_button;
pub mod layout;
pub mod new_key;
pub mod raw_or_pretty;

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
