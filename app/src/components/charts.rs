//! The endpoint page's charts, drawn on the server as SVG so they need no
//! script and no chart library.

use leptos::prelude::*;

use crate::format;

/// Stacked bars, delivered under failed, one per hour; rendered on the
/// server as SVG so it needs no script and no chart library.
#[component]
pub fn Chart(hourly: Vec<(i64, i64, i64)>) -> impl IntoView {
    const W: f64 = 720.0;
    const H: f64 = 160.0;
    let most = hourly
        .iter()
        .map(|(_, ok, bad)| ok + bad)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let slot = W / hourly.len().max(1) as f64;
    let bars = hourly
        .iter()
        .enumerate()
        .map(|(i, (start, ok, bad))| {
            let x = i as f64 * slot + 2.0;
            let ok_h = *ok as f64 / most * (H - 20.0);
            let bad_h = *bad as f64 / most * (H - 20.0);
            let title = format!("{}: {ok} delivered, {bad} failed", format::time(*start));
            let label = (i % 6 == 0).then(|| {
                let hour = format::time(*start)[11..16].to_string();
                view! { <text x=x y=H - 2.0 class="axis">{hour}</text> }
            });
            view! {
                <g>
                    <title>{title}</title>
                    <rect x=x y=H - 16.0 - ok_h width=slot - 4.0 height=ok_h class="bar ok" />
                    <rect x=x y=H - 16.0 - ok_h - bad_h width=slot - 4.0 height=bad_h class="bar bad" />
                </g>
                {label}
            }
        })
        .collect_view();
    let total_ok: i64 = hourly.iter().map(|h| h.1).sum();
    let total_bad: i64 = hourly.iter().map(|h| h.2).sum();
    view! {
        <svg class="chart" viewBox=format!("0 0 {W} {H}") role="img" data-testid="chart"
            aria-label=format!("{total_ok} delivered and {total_bad} failed attempts in 24 hours")>
            {bars}
        </svg>
        <p class="legend small">
            <span class="swatch ok"></span>" delivered "
            <span class="swatch bad"></span>" failed or retried"
        </p>
    }
}
