//! Changing an endpoint's URL, description, event types and limits.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::{
    api::endpoints::{get_endpoint_form, UpdateEndpoint},
    components::{
        endpoint_fields::{refused, EndpointFields},
        layout::{ErrorNotice, Layout},
    },
    format,
};

#[component]
pub fn EndpointEditPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let update = ServerAction::<UpdateEndpoint>::new();
    let start = Resource::new(id, get_endpoint_form);
    let back = move || format!("/endpoints/{}", format::path_segment(&id()));
    let error = move || match update.value().get() {
        Some(Err(e)) => Some(view! { <ErrorNotice error=e /> }),
        _ => None,
    };
    view! {
        <Title text="Edit endpoint" />
        <Layout>
            <p class="crumbs">
                <a href=back>"← Endpoint"</a>
            </p>
            <h1>"Edit endpoint"</h1>
            <Transition fallback=|| view! { <p class="muted">"Loading the endpoint…"</p> }>
                {move || Suspend::new(async move {
                    match start.await {
                        Ok(start) => view! {
                            <section class="card">
                                {error}
                                <ActionForm action=update attr:class="form-grid" attr:data-testid="edit-endpoint">
                                    <input type="hidden" name="id" value=id() />
                                    <EndpointFields start refused=refused(update.value()) prefix="edit" />
                                    <div class="actions">
                                        <button type="submit" class="button primary" data-testid="save-endpoint">"Save"</button>
                                        <a href=back class="button secondary">"Cancel"</a>
                                    </div>
                                </ActionForm>
                                <p class="muted small">
                                    "An empty rate limit or max in flight goes back to the default. Deliveries already queued go to the new URL from their next attempt."
                                </p>
                            </section>
                        }
                        .into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Transition>
        </Layout>
    }
}
