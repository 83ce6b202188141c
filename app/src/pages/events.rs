//! The events list. For now: who is signed in, and how to send a first event.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::components::layout::Layout;

#[component]
pub fn EventsPage() -> impl IntoView {
    view! {
        <Title text="Events" />
        <Layout>
            <h1>"Events"</h1>
            <section class="card empty-state">
                <h2>"No events yet"</h2>
                <p>"Create an API key, then send your first event:"</p>
                <pre><code>{FIRST_EVENT}</code></pre>
            </section>
        </Layout>
    }
}

const FIRST_EVENT: &str = "curl -X POST http://127.0.0.1:3000/api/v1/events \\
  -H \"Authorization: Bearer $DAKGHAR_API_KEY\" \\
  -H 'content-type: application/json' \\
  -d '{\"type\": \"invoice.paid\", \"payload\": {\"id\": \"in_1\"}}'";
