//! A body as sent, in two views: Pretty (re-indented and coloured, every
//! character of every token kept) and Raw (the exact text). The switch is
//! a pair of radio buttons styled as tabs, so it works without JavaScript.

use leptos::prelude::*;

use crate::json_text;

/// `name` must be unique on the page (it groups the two radio buttons);
/// `testid` marks the pretty view, `{testid}-raw` the raw one.
#[component]
pub fn RawOrPretty(
    raw: String,
    name: String,
    testid: &'static str,
    #[prop(optional)] small: bool,
) -> impl IntoView {
    let pieces = json_text::pretty(&raw);
    // Not JSON: one view is all there is.
    let only_raw = pieces.len() == 1;
    let class = if small { "code small" } else { "code" };
    if only_raw {
        return view! {
            <pre class=class data-testid=testid><code>{raw}</code></pre>
        }
        .into_any();
    }
    let pretty_id = format!("{name}-pretty");
    let raw_id = format!("{name}-raw");
    view! {
        <div class="raw-or-pretty">
            <input type="radio" class="view-pretty" name=name.clone() id=pretty_id.clone() checked />
            <label for=pretty_id>"Pretty"</label>
            <input type="radio" class="view-raw" name=name id=raw_id.clone() />
            <label for=raw_id>"Raw"</label>
            <pre class=format!("{class} pretty") data-testid=testid>
                <code>
                    {pieces
                        .into_iter()
                        .map(|(kind, text)| view! { <span class=kind.class()>{text}</span> })
                        .collect_view()}
                </code>
            </pre>
            <pre class=format!("{class} raw") data-testid=format!("{testid}-raw")>
                <code>{raw}</code>
            </pre>
        </div>
    }
    .into_any()
}
