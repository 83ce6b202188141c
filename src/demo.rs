//! `dakghar demo`: the product with something to look at. A demo account
//! and admin, three endpoints on a receiver built into the process (one
//! healthy, one flaky that answers 500 or 429 with Retry-After now and
//! then, one that answers 410 Gone), and a trickle of events.

use std::{sync::Arc, time::Duration};

use axum::{
    http::{HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Router,
};
use rand::Rng;
use tokio_util::sync::CancellationToken;

use crate::{
    accounts,
    auth::password,
    clock::SharedClock,
    context::Ctx,
    delivery::signing,
    endpoints::DEFAULT_MAX_IN_FLIGHT,
    error::Result,
    events, ids,
    store::{EndpointPatch, EndpointState, NewEndpoint, NewEvent, Role, Store, StoreError},
};

pub const ACCOUNT: &str = "Demo";
pub const EMAIL: &str = "demo@dakghar.local";

pub struct DemoLogin {
    pub email: String,
    pub password: String,
    pub account_id: String,
}

/// The built-in receiver on 127.0.0.1; returns its base URL.
pub async fn start_receiver(shutdown: CancellationToken) -> std::io::Result<String> {
    let app = Router::new()
        .route("/healthy", post(healthy))
        .route("/flaky", post(flaky))
        .route("/gone", post(|| async { StatusCode::GONE }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
    });
    Ok(base)
}

async fn healthy() -> StatusCode {
    let pause = rand::thread_rng().gen_range(5..60);
    tokio::time::sleep(Duration::from_millis(pause)).await;
    StatusCode::NO_CONTENT
}

async fn flaky() -> Response {
    let roll = rand::thread_rng().gen_range(0..100);
    match roll {
        0..=14 => (StatusCode::INTERNAL_SERVER_ERROR, "database is on fire").into_response(),
        15..=24 => {
            let mut res = (StatusCode::TOO_MANY_REQUESTS, "slow down").into_response();
            res.headers_mut()
                .insert("retry-after", HeaderValue::from_static("20"));
            res
        }
        _ => StatusCode::OK.into_response(),
    }
}

/// Creates (or refreshes) the demo account, its admin with a new password,
/// and its endpoints pointed at `receiver`.
pub async fn seed(store: &Store, clock: &SharedClock, receiver: &str) -> Result<DemoLogin> {
    let now = clock.now();
    let account = accounts::ensure_account(store, ACCOUNT, now).await?;
    let secret = ids::random_token(16);
    let hash = password::hash_off_thread(secret.clone()).await?;
    match store.user_by_email(EMAIL).await {
        Ok(user) => store.set_password(&user.id, &hash).await?,
        Err(StoreError::NotFound) => {
            store
                .create_user(&account.id, EMAIL, &hash, Role::Admin, now)
                .await?;
        }
        Err(e) => return Err(e.into()),
    }
    let existing = store.list_endpoints(&account.id).await?;
    for (name, path, types) in [
        ("healthy", "/healthy", vec![]),
        ("flaky", "/flaky", vec![]),
        ("gone", "/gone", vec!["invoice.paid".to_string()]),
    ] {
        let description = format!("demo: {name}");
        let url = format!("{receiver}{path}");
        match existing.iter().find(|e| e.description == description) {
            Some(e) => {
                // The receiver's port is new each run.
                let patch = EndpointPatch {
                    url: Some(url),
                    ..EndpointPatch::default()
                };
                store
                    .update_endpoint(&account.id, &e.id, patch, now)
                    .await?;
                if e.state == EndpointState::Paused {
                    store.resume_endpoint(&account.id, &e.id, now).await?;
                }
            }
            None => {
                let new = NewEndpoint {
                    account_id: account.id.clone(),
                    url,
                    description,
                    event_types: types,
                    secret: signing::new_secret(),
                    rate_limit_per_sec: None,
                    max_in_flight: DEFAULT_MAX_IN_FLIGHT,
                    retry_strategy: None,
                    retry_statuses: None,
                };
                store.create_endpoint(new, now).await?;
            }
        }
    }
    Ok(DemoLogin {
        email: EMAIL.to_string(),
        password: secret,
        account_id: account.id,
    })
}

const TYPES: [&str; 4] = [
    "invoice.paid",
    "invoice.failed",
    "customer.created",
    "order.shipped",
];

/// An event every `every` or so until `shutdown`, ingested as the API
/// ingests one.
pub fn trickle(
    ctx: Arc<Ctx>,
    account_id: String,
    every: Duration,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut n: u64 = 0;
        loop {
            n += 1;
            let (ty, amount) = {
                let mut rng = rand::thread_rng();
                (
                    TYPES[rng.gen_range(0..TYPES.len())],
                    rng.gen_range(100..100_000),
                )
            };
            let payload = serde_json::json!({
                "object": ty.split('.').next().unwrap_or("thing"),
                "amount": amount,
                "currency": "EUR",
                "sequence": n,
            });
            let event = NewEvent {
                account_id: account_id.clone(),
                id: ids::new_id(ids::EVENT),
                event_type: ty.to_string(),
                payload: payload.to_string().into_bytes(),
            };
            if let Err(e) = events::ingest(&ctx, event, None, None, None).await {
                tracing::warn!(error = %e, "demo event not stored");
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
        }
    })
}
