//! A moment as the viewer reads it. The server does not know the viewer's
//! time zone, and hydration must find the text the server wrote, so the
//! page arrives in UTC; once it runs in the browser the text turns to the
//! viewer's zone. UTC stays on hover and, for machines, in `datetime`.

use leptos::prelude::*;

use crate::format;

/// `relative_to` (the server's clock) adds "3 min ago" or "in 2 h", for
/// lists.
#[component]
pub fn Time(ms: i64, #[prop(optional)] relative_to: Option<i64>) -> impl IntoView {
    let utc = format::time(ms);
    let shown = RwSignal::new(utc.clone());
    Effect::new(move |_| {
        if let Some(offset) = local_offset_minutes(ms) {
            shown.set(format::time_at_offset(ms, offset));
        }
    });
    let text = move || match relative_to {
        Some(now) => format::relative(ms, now),
        None => shown.get(),
    };
    // In a list the relative time is the text, the exact one the hover.
    let title = move || {
        let local = shown.get();
        match relative_to {
            Some(_) if local != utc => format!("{local} · {utc}"),
            _ => utc.clone(),
        }
    };
    view! { <time datetime=format::iso(ms) title=title>{text}</time> }
}

/// The viewer's offset from UTC at `ms`, for text built around times
/// (chart labels): 0 in the server's render, the browser's once hydrated.
pub fn viewer_offset(ms: i64) -> ReadSignal<i64> {
    let (offset, set) = signal(0);
    Effect::new(move |_| {
        if let Some(local) = local_offset_minutes(ms) {
            set.set(local);
        }
    });
    offset
}

/// Minutes east of UTC in the browser's zone at that moment (so summer
/// time is right for each date); `None` on the server.
#[cfg(feature = "hydrate")]
pub fn local_offset_minutes(ms: i64) -> Option<i64> {
    let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ms as f64));
    // JavaScript counts the other way: UTC minus local.
    Some(-(date.get_timezone_offset() as i64))
}

#[cfg(not(feature = "hydrate"))]
pub fn local_offset_minutes(_ms: i64) -> Option<i64> {
    None
}

/// The browser's clock in unix milliseconds; 0 on the server, where only
/// hydrated code asks.
#[cfg(feature = "hydrate")]
pub fn js_now() -> i64 {
    js_sys::Date::now() as i64
}

#[cfg(not(feature = "hydrate"))]
pub fn js_now() -> i64 {
    0
}
