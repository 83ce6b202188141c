//! The admin pages' data and actions. The role is checked again here, so
//! no path through the port skips it.

use std::time::Duration;

use app::{
    error::AppError,
    model::{
        account::ApiKeyView,
        admin::{AccountLine, AdminOverview, PreviewLine, ReplayForm, ReplayView},
        Viewer,
    },
};

use crate::{
    accounts::{self, platform},
    clock::Timestamp,
    context::Ctx,
    replay,
    store::{Replay, ReplayCriteria, ReplayProgress},
};

fn require_admin(viewer: &Viewer) -> Result<(), AppError> {
    if viewer.is_admin && !viewer.portal {
        Ok(())
    } else {
        Err(AppError::Forbidden)
    }
}

pub async fn overview(ctx: &Ctx, viewer: &Viewer) -> Result<AdminOverview, AppError> {
    require_admin(viewer)?;
    let now = ctx.clock.now();
    let hour_ago = Timestamp(now.millis() - 3_600_000);
    let (accounts, rates) = accounts::installation(&ctx.store, hour_ago).await?;
    let share = |part: i64, whole: i64| (whole > 0).then(|| part as f64 / whole as f64);
    Ok(AdminOverview {
        delivery_rate_1h: share(rates.delivered_attempts, rates.attempts),
        attempts_1h: rates.attempts,
        dead_letter_rate_1h: share(rates.dead_lettered, rates.finished),
        finished_1h: rates.finished,
        accounts: accounts
            .into_iter()
            .map(|a| AccountLine {
                id: a.id,
                name: a.name,
                queued: a.queued,
                dead_letters: a.dead_letters,
                failing_endpoints: a.failing_endpoints,
            })
            .collect(),
    })
}

fn day(raw: &str, name: &str, end_of_day: bool) -> Result<Option<i64>, AppError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    let date = chrono::NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        .map_err(|_| AppError::Invalid(format!("{name} must be a date such as 2026-01-31")))?;
    let date = if end_of_day {
        date.succ_opt().unwrap_or(date)
    } else {
        date
    };
    Ok(date
        .and_hms_opt(0, 0, 0)
        .map(|t| t.and_utc().timestamp_millis()))
}

fn criteria(form: &ReplayForm) -> Result<(ReplayCriteria, Duration), AppError> {
    let text = |v: &str| Some(v.trim().to_string()).filter(|v| !v.is_empty());
    let c = ReplayCriteria {
        failed: form.failed.is_some(),
        expired: form.expired.is_some(),
        pending: form.pending.is_some(),
        since: day(&form.since, "the start day", false)?,
        until: day(&form.until, "the end day", true)?,
        account_id: text(&form.account_id),
        endpoint_id: text(&form.endpoint_id),
        event_type: text(&form.event_type),
    };
    let window = match text(&form.window) {
        None => replay::DEFAULT_WINDOW,
        Some(w) => humantime::parse_duration(&w).map_err(|_| {
            AppError::Invalid("spread over must be a duration such as 5m or 1h".into())
        })?,
    };
    Ok((c, window))
}

pub async fn preview(
    ctx: &Ctx,
    viewer: &Viewer,
    form: ReplayForm,
) -> Result<Vec<PreviewLine>, AppError> {
    require_admin(viewer)?;
    let (c, window) = criteria(&form)?;
    let groups = replay::preview(ctx, &c, window).await?;
    Ok(groups
        .into_iter()
        .map(|g| PreviewLine {
            account_name: g.account_name,
            endpoint_id: g.endpoint_id,
            endpoint_url: g.endpoint_url,
            count: g.count,
        })
        .collect())
}

pub async fn start(ctx: &Ctx, viewer: &Viewer, form: ReplayForm) -> Result<String, AppError> {
    require_admin(viewer)?;
    let (c, window) = criteria(&form)?;
    let actor = &viewer.actor;
    let started = replay::start(ctx, &c, actor, window).await?;
    Ok(started.id)
}

fn view_of(r: Replay, p: ReplayProgress) -> ReplayView {
    ReplayView {
        id: r.id,
        actor: r.actor,
        kind: r.kind,
        criteria: r.criteria,
        count: r.count,
        status: r.status,
        created_at: r.created_at,
        pending: p.pending,
        in_flight: p.in_flight,
        delivered: p.delivered,
        failed: p.failed,
        expired: p.expired,
    }
}

pub async fn status(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<ReplayView, AppError> {
    require_admin(viewer)?;
    let (r, progress) = replay::status(ctx, id).await?;
    Ok(view_of(r, progress))
}

pub async fn cancel(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<(), AppError> {
    require_admin(viewer)?;
    replay::cancel(ctx, id, &viewer.actor).await?;
    Ok(())
}

/// The log without progress counts: each bulk replay's page has those.
pub async fn audit(ctx: &Ctx, viewer: &Viewer) -> Result<Vec<ReplayView>, AppError> {
    require_admin(viewer)?;
    let rows = replay::audit_log(ctx).await?;
    Ok(rows
        .into_iter()
        .map(|r| view_of(r, ReplayProgress::default()))
        .collect())
}

pub async fn platform_keys(ctx: &Ctx, viewer: &Viewer) -> Result<Vec<ApiKeyView>, AppError> {
    require_admin(viewer)?;
    Ok(platform::keys(&ctx.store)
        .await?
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

pub async fn create_platform_key(
    ctx: &Ctx,
    viewer: &Viewer,
    name: &str,
) -> Result<String, AppError> {
    require_admin(viewer)?;
    let key = platform::create_key(&ctx.store, name, ctx.clock.now()).await?;
    tracing::info!(actor = %viewer.actor, "platform key created");
    Ok(key.key)
}

pub async fn revoke_platform_key(ctx: &Ctx, viewer: &Viewer, id: &str) -> Result<(), AppError> {
    require_admin(viewer)?;
    platform::revoke_key(&ctx.store, id, ctx.clock.now()).await?;
    tracing::info!(actor = %viewer.actor, key = %id, "platform key revoked");
    Ok(())
}
