//! The endpoint form's fields, shared by adding and editing: each shows
//! its own error, and what was typed comes back after a refusal, also
//! without JavaScript.

use leptos::prelude::*;

use crate::{
    error::{AppError, FieldErrors},
    model::endpoints::EndpointForm,
};

struct Field {
    name: &'static str,
    label: &'static str,
    kind: &'static str,
    placeholder: &'static str,
    required: bool,
    value: fn(&EndpointForm) -> &String,
}

const FIELDS: [Field; 5] = [
    Field {
        name: "url",
        value: |f| &f.url,
        label: "URL",
        kind: "url",
        placeholder: "https://example.com/webhooks",
        required: true,
    },
    Field {
        name: "description",
        value: |f| &f.description,
        label: "Description",
        kind: "text",
        placeholder: "Billing service",
        required: false,
    },
    Field {
        name: "event_types",
        value: |f| &f.event_types,
        label: "Event types",
        kind: "text",
        placeholder: "invoice.paid, invoice.failed (empty: all)",
        required: false,
    },
    Field {
        name: "rate_limit_per_sec",
        value: |f| &f.rate_limit_per_sec,
        label: "Rate limit (per second)",
        kind: "text",
        placeholder: "the default, or a number, or unlimited",
        required: false,
    },
    Field {
        name: "max_in_flight",
        value: |f| &f.max_in_flight,
        label: "Max in flight",
        kind: "text",
        placeholder: "10",
        required: false,
    },
];

/// The field errors of a refused submit, if that is how it was refused.
pub fn refused<T, S>(value: S) -> Signal<Option<FieldErrors>>
where
    T: 'static,
    S: Get<Value = Option<Result<T, AppError>>> + Send + Sync + 'static,
{
    Signal::derive(move || match value.get() {
        Some(Err(AppError::Fields(f))) => Some(f),
        _ => None,
    })
}

/// `start` fills the fields, unless a refusal brought back what was typed.
#[component]
pub fn EndpointFields(
    start: EndpointForm,
    refused: Signal<Option<FieldErrors>>,
    /// Keeps ids unique when two forms share a page.
    prefix: &'static str,
) -> impl IntoView {
    let typed = refused.get_untracked();
    FIELDS
        .iter()
        .map(|f| {
            let id = format!("{prefix}-{}", f.name);
            let error_id = format!("{id}-error");
            let value = typed
                .as_ref()
                .and_then(|t| t.typed(f.name).map(str::to_string))
                .unwrap_or_else(|| (f.value)(&start).clone());
            let name = f.name;
            let error = move || refused.get().and_then(|r| r.error(name).map(str::to_string));
            let described = error_id.clone();
            view! {
                <div class="field">
                    <label for=id.clone()>{f.label}</label>
                    <input
                        id=id
                        name=format!("form[{}]", f.name)
                        type=f.kind
                        required=f.required
                        placeholder=f.placeholder
                        value=value
                        aria-invalid=move || error().is_some().then_some("true")
                        aria-describedby=move || error().is_some().then(|| described.clone())
                    />
                    {move || error().map(|m| view! {
                        <p class="field-error" id=error_id.clone() data-testid=format!("field-error-{name}")>{m}</p>
                    })}
                </div>
            }
        })
        .collect_view()
}
