//! Notifications, API keys and the delivery contract for the dashboard.

use std::time::Duration;

use app::{
    error::AppError,
    model::{
        account::{ApiKeyView, Contract, NotificationView},
        Viewer,
    },
};

use crate::{accounts, context::Ctx, delivery::backoff::Jitter};

pub async fn notifications(ctx: &Ctx, viewer: &Viewer) -> Result<Vec<NotificationView>, AppError> {
    let list = accounts::notifications(&ctx.store, &viewer.account_id).await?;
    Ok(list
        .into_iter()
        .map(|n| NotificationView {
            id: n.id,
            kind: n.kind,
            subject: n.subject,
            body: n.body,
            endpoint_id: n.endpoint_id,
            created_at: n.created_at,
            sent_at: n.sent_at,
        })
        .collect())
}

pub async fn api_keys(ctx: &Ctx, viewer: &Viewer) -> Result<Vec<ApiKeyView>, AppError> {
    let keys = accounts::api_keys(&ctx.store, &viewer.account_id).await?;
    Ok(keys
        .into_iter()
        .map(|k| ApiKeyView {
            id: k.id,
            prefix: k.prefix,
            created_at: k.created_at,
            revoked_at: k.revoked_at,
            name: k.name,
            last_used_at: k.last_used_at,
        })
        .collect())
}

/// Customers create plain keys; admin keys come from the command line.
pub async fn create_api_key(ctx: &Ctx, viewer: &Viewer, name: &str) -> Result<String, AppError> {
    let key =
        accounts::create_api_key(&ctx.store, &viewer.account_id, name, false, ctx.clock.now())
            .await?;
    Ok(key.key)
}

pub async fn revoke_api_key(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<(), AppError> {
    Ok(accounts::revoke_api_key(&ctx.store, &viewer.account_id, id, ctx.clock.now()).await?)
}

fn human(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// The delivery contract from the running configuration, and the API.
pub fn contract(ctx: &Ctx, api: &[(String, String, String)]) -> Contract {
    let s = ctx.engine.settings();
    let retries = s.max_attempts.saturating_sub(1).min(30);
    let schedule = (1..=retries)
        .map(|n| {
            let ceiling = s.backoff.ceiling(n);
            let floor = match s.backoff.jitter {
                Jitter::Equal => ceiling / 2,
                Jitter::Full => Duration::ZERO,
            };
            (n + 1, human(floor), human(ceiling))
        })
        .collect();
    Contract {
        retry_window: human(s.retry_window),
        max_attempts: s.max_attempts,
        jitter: match s.backoff.jitter {
            Jitter::Equal => "equal".into(),
            Jitter::Full => "full".into(),
        },
        retry_strategy: s.backoff.strategy.as_str().into(),
        retry_statuses: s.retry_statuses.to_string(),
        default_rate_limit: s.default_rate_limit,
        max_in_flight_per_host: s.max_in_flight_per_host,
        request_timeout: human(s.request_timeout),
        connect_timeout: human(s.connect_timeout),
        rotation_overlap: human(s.rotation_overlap),
        resends_per_minute: ctx.config.resends_per_minute,
        schedule,
        base_url: format!("http://{}", ctx.config.listen),
        api: api.to_vec(),
    }
}
