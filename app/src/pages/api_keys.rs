//! API keys: create (the whole key is shown once), list by prefix, revoke.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::{
    api::account::{list_api_keys, CreateApiKey, RevokeApiKey},
    components::{
        ask_first::AskFirst,
        layout::{ErrorNotice, Layout},
        new_key::NewKey,
        time::Time,
    },
};

#[component]
pub fn ApiKeysPage() -> impl IntoView {
    let create = ServerAction::<CreateApiKey>::new();
    let revoke = ServerAction::<RevokeApiKey>::new();
    let hydrated = crate::components::hydrated();
    let keys = Resource::new(
        move || (create.version().get(), revoke.version().get()),
        |_| list_api_keys(),
    );
    view! {
        <Title text="API keys" />
        <Layout>
            <div class="page-head">
                <h1>"API keys"</h1>
                // The whole key can only be shown by the page that asked for
                // it, which needs JavaScript: without it there is no button
                // that would make a key nobody sees.
                <Show
                    when=move || hydrated.get()
                    fallback=|| view! {
                        <p class="muted small" data-testid="create-key-needs-js">
                            "Creating a key needs JavaScript: the key is shown once, on this page."
                        </p>
                    }
                >
                    <ActionForm action=create attr:class="inline-form">
                        <label>
                            "Name "
                            <input name="name" maxlength="100" placeholder="what uses it, e.g. billing producer" data-testid="new-key-name" />
                        </label>
                        <button type="submit" class="button primary" data-testid="create-key">"Create key"</button>
                    </ActionForm>
                </Show>
            </div>
            <NewKey answer=create.value().into() what="Your new key" testid="new-key" />
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match keys.await {
                        Ok(keys) if keys.is_empty() => view! {
                            <p class="card muted">"No keys yet. Producers send events with a key: create one."</p>
                        }
                        .into_any(),
                        Ok(keys) => view! {
                            <table class="table" data-testid="keys-table">
                                <thead>
                                    <tr><th>"Name"</th><th>"Key"</th><th>"Created"</th><th>"Last used"</th><th>"State"</th><th></th></tr>
                                </thead>
                                <tbody>
                                    {keys
                                        .into_iter()
                                        .map(|k| {
                                            let revoked = k.revoked_at.is_some();
                                            let key_id = k.id.clone();
                                            view! {
                                                <tr data-testid="key-row">
                                                    <td data-testid="key-name" data-label="Name">{k.name.clone()}</td>
                                                    <td data-label="Key"><code>{format!("{}…", k.prefix)}</code></td>
                                                    <td class="time" data-label="Created"><Time ms=k.created_at /></td>
                                                    <td class="time" data-testid="key-last-used" data-label="Last used">
                                                        {match k.last_used_at {
                                                            Some(t) => view! { <Time ms=t /> }.into_any(),
                                                            None => view! { <span class="muted">"never"</span> }.into_any(),
                                                        }}
                                                    </td>
                                                    <td data-label="State">
                                                        {match k.revoked_at {
                                                            Some(t) => view! { <span class="badge expired">"revoked"</span> <span class="muted small"><Time ms=t /></span> }.into_any(),
                                                            None => view! { <span class="badge delivered">"active"</span> }.into_any(),
                                                        }}
                                                    </td>
                                                    <td>
                                                        {(!revoked).then(|| view! {
                                                            <AskFirst
                                                                label="Revoke"
                                                                question="Revoke this key? Producers using it are refused at once."
                                                                testid="revoke-key"
                                                            >
                                                                <ActionForm action=revoke>
                                                                    <input type="hidden" name="id" value=key_id />
                                                                    <button type="submit" class="button danger small" data-testid="revoke-key-confirm">"Yes, revoke it"</button>
                                                                </ActionForm>
                                                            </AskFirst>
                                                        })}
                                                    </td>
                                                </tr>
                                            }
                                        })
                                        .collect_view()}
                                </tbody>
                            </table>
                        }
                        .into_any(),
                        Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                    }
                })}
            </Transition>
        </Layout>
    }
}
