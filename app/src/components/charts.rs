//! The endpoint page's charts, drawn on the server as SVG so they need no
//! script and no chart library. Each carries its numbers twice more: in
//! hover titles, and in a visually hidden table for screen readers.

use leptos::prelude::*;

use crate::{components::time::viewer_offset, format, model::endpoints::LatencyPoint};

const W: f64 = 720.0;
const H: f64 = 170.0;
/// Room for the y-axis labels on the left and the x-axis labels below.
const LEFT: f64 = 48.0;
const BOTTOM: f64 = 18.0;
const TOP: f64 = 8.0;

fn plot_height() -> f64 {
    H - BOTTOM - TOP
}

/// `HH:MM` of an hour on the wall clock `offset` minutes east of UTC, for
/// the x axis.
fn hour_label(start: i64, offset: i64) -> String {
    format::time_at_offset(start, offset)[11..16].to_string()
}

/// `YYYY-MM-DD` of a day (days are UTC days: that is how they are counted).
fn day(start: i64) -> String {
    format::time(start)[..10].to_string()
}

/// Three labelled gridlines, 0 to `most`.
fn y_axis(most: f64, label: impl Fn(f64) -> String) -> impl IntoView {
    [0.0, 0.5, 1.0]
        .into_iter()
        .map(|f| {
            let y = TOP + plot_height() * (1.0 - f);
            view! {
                <line x1=LEFT y1=y x2=W y2=y class="grid" />
                <text x=LEFT - 4.0 y=y + 4.0 class="axis" text-anchor="end">{label(most * f)}</text>
            }
        })
        .collect_view()
}

/// Stacked bars, delivered under failed, one per hour. Failed bars are
/// hatched, so they read apart without colour.
#[component]
pub fn AttemptsChart(hourly: Vec<(i64, i64, i64)>) -> impl IntoView {
    let most = hourly
        .iter()
        .map(|(_, ok, bad)| ok + bad)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let slot = (W - LEFT) / hourly.len().max(1) as f64;
    let scale = plot_height() / most;
    let offset = viewer_offset(hourly.first().map_or(0, |h| h.0));
    let bars = hourly
        .iter()
        .enumerate()
        .map(|(i, (start, ok, bad))| {
            let x = LEFT + i as f64 * slot + 2.0;
            let ok_h = *ok as f64 * scale;
            let bad_h = *bad as f64 * scale;
            let base = TOP + plot_height();
            let (start, ok, bad) = (*start, *ok, *bad);
            let title = move || {
                format!(
                    "{}: {ok} delivered, {bad} failed",
                    format::time_at_offset(start, offset.get())
                )
            };
            let label = (i % 6 == 0).then(|| {
                view! { <text x=x y=H - 4.0 class="axis">{move || hour_label(start, offset.get())}</text> }
            });
            view! {
                <g>
                    <title>{title}</title>
                    <rect x=x y=base - ok_h width=slot - 4.0 height=ok_h class="bar ok" />
                    <rect x=x y=base - ok_h - bad_h width=slot - 4.0 height=bad_h class="bar bad" fill="url(#hatch)" />
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
            <defs>
                <pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
                    <rect width="6" height="6" class="hatch-bg" />
                    <line x1="0" y1="0" x2="0" y2="6" class="hatch-line" />
                </pattern>
            </defs>
            {y_axis(most, |v| format!("{}", v.round() as i64))}
            {bars}
        </svg>
        <p class="legend small">
            <span class="swatch ok"></span>" delivered "
            <span class="swatch bad hatched"></span>" failed or retried (hatched) · attempts per hour, "
            {move || format::zone(offset.get())}
        </p>
    }
    .into_any()
}

/// p50 (solid, circles) and p95 (dashed, squares) of each bucket; a bucket
/// without attempts leaves a gap.
#[component]
pub fn LatencyChart(
    points: Vec<LatencyPoint>,
    /// A point a day rather than an hour.
    daily: bool,
    testid: &'static str,
) -> impl IntoView {
    let per = if daily { "per day" } else { "per hour" };
    let most = points
        .iter()
        .filter_map(|p| p.p95_ms.or(p.p50_ms))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let slot = (W - LEFT) / points.len().max(1) as f64;
    let x_of = |i: usize| LEFT + i as f64 * slot + slot / 2.0;
    let offset = viewer_offset(points.first().map_or(0, |p| p.start));
    let y_of = |ms: i64| TOP + plot_height() * (1.0 - ms as f64 / most);
    let line = |pick: fn(&LatencyPoint) -> Option<i64>, class: &'static str| {
        // One polyline per run of buckets that had attempts.
        let mut runs: Vec<Vec<String>> = vec![Vec::new()];
        for (i, p) in points.iter().enumerate() {
            match pick(p) {
                Some(ms) => runs
                    .last_mut()
                    .map(|r| r.push(format!("{:.1},{:.1}", x_of(i), y_of(ms))))
                    .unwrap_or_default(),
                None => runs.push(Vec::new()),
            }
        }
        runs.into_iter()
            .filter(|r| !r.is_empty())
            .map(|r| view! { <polyline points=r.join(" ") class=class /> })
            .collect_view()
    };
    let marks = points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let x = x_of(i);
            let (start, p50, p95) = (p.start, p.p50_ms, p.p95_ms);
            let when = move || {
                if daily {
                    day(start)
                } else {
                    format::time_at_offset(start, offset.get())
                }
            };
            let title = move || match (p50, p95) {
                (Some(a), Some(b)) => format!(
                    "{}: p50 {}, p95 {}",
                    when(),
                    format::duration_ms(a),
                    format::duration_ms(b)
                ),
                _ => format!("{}: no attempts", when()),
            };
            let label = (daily || i % 6 == 0).then(|| {
                let text = move || {
                    if daily {
                        day(start)[5..].to_string()
                    } else {
                        hour_label(start, offset.get())
                    }
                };
                view! { <text x=x - 14.0 y=H - 4.0 class="axis">{text}</text> }
            });
            view! {
                <g>
                    <title>{title}</title>
                    {p.p50_ms.map(|ms| view! { <circle cx=x cy=y_of(ms) r="3" class="p50" /> })}
                    {p.p95_ms.map(|ms| view! { <rect x=x - 3.0 y=y_of(ms) - 3.0 width="6" height="6" class="p95" /> })}
                </g>
                {label}
            }
        })
        .collect_view();
    let slowest = points.iter().filter_map(|p| p.p95_ms).max();
    let summary = match slowest {
        Some(ms) => format!(
            "Latency {per}: the slowest p95 was {}",
            format::duration_ms(ms)
        ),
        None => format!("Latency {per}: no attempts"),
    };
    view! {
        <svg class="chart latency" viewBox=format!("0 0 {W} {H}") role="img" data-testid=testid aria-label=summary>
            {y_axis(most, |v| format::duration_ms(v.round() as i64))}
            {line(|p| p.p50_ms, "p50")}
            {line(|p| p.p95_ms, "p95")}
            {marks}
        </svg>
    }
    .into_any()
}

/// The charts' numbers as a table only screen readers see.
#[component]
pub fn ChartData(hourly: Vec<(i64, i64, i64)>, latency: Vec<LatencyPoint>) -> impl IntoView {
    let ms = format::optional_ms;
    let offset = viewer_offset(hourly.first().map_or(0, |h| h.0));
    let rows = hourly
        .iter()
        .zip(latency.iter())
        .map(|((start, ok, bad), l)| {
            view! {
                <tr>
                    <th scope="row">{let start = *start; move || format::time_at_offset(start, offset.get())}</th>
                    <td>{*ok}</td>
                    <td>{*bad}</td>
                    <td>{ms(l.p50_ms)}</td>
                    <td>{ms(l.p95_ms)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        // The class is on a wrapper: a table is never narrower than its
        // content, so clipping the table itself would still widen a phone's page.
        <div class="visually-hidden">
        <table data-testid="chart-data">
            <caption>"Attempts and latency per hour, last 24 hours"</caption>
            <thead>
                <tr>
                    <th scope="col">"Hour"</th>
                    <th scope="col">"Delivered"</th>
                    <th scope="col">"Failed"</th>
                    <th scope="col">"p50"</th>
                    <th scope="col">"p95"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
        </div>
    }
    .into_any()
}

/// The week's latency as a table only screen readers see.
#[component]
pub fn DailyData(latency: Vec<LatencyPoint>) -> impl IntoView {
    let ms = format::optional_ms;
    view! {
        <div class="visually-hidden">
        <table data-testid="daily-data">
            <caption>"Latency per day, last 7 days"</caption>
            <thead>
                <tr><th scope="col">"Day"</th><th scope="col">"p50"</th><th scope="col">"p95"</th></tr>
            </thead>
            <tbody>
                {latency
                    .iter()
                    .map(|l| view! {
                        <tr>
                            <th scope="row">{day(l.start)}</th>
                            <td>{ms(l.p50_ms)}</td>
                            <td>{ms(l.p95_ms)}</td>
                        </tr>
                    })
                    .collect_view()}
            </tbody>
        </table>
        </div>
    }
    .into_any()
}
