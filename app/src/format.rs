//! Times and durations as the pages print them. The server and the browser
//! must print the same text (hydration compares them), so times are
//! rendered in UTC and computed here rather than from the browser's
//! locale; `components::time` turns them to the viewer's zone afterwards.

/// `2026-11-30 14:05:09 UTC` from unix milliseconds.
pub fn time(ms: i64) -> String {
    time_at_offset(ms, 0)
}

/// The wall clock `offset_minutes` east of UTC, named by its offset:
/// `2026-11-30 20:05:09 UTC+06:00`.
pub fn time_at_offset(ms: i64, offset_minutes: i64) -> String {
    let (y, m, d, h, mi, s) = civil(ms + offset_minutes * 60_000);
    format!(
        "{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02} {}",
        zone(offset_minutes)
    )
}

/// A zone by its offset: `UTC`, `UTC+06:00`, `UTC-05:30`.
pub fn zone(offset_minutes: i64) -> String {
    match offset_minutes {
        0 => "UTC".to_string(),
        o => format!(
            "UTC{}{:02}:{:02}",
            if o < 0 { '-' } else { '+' },
            o.abs() / 60,
            o.abs() % 60
        ),
    }
}

/// For `<time datetime>`: `2026-11-30T14:05:09Z`.
pub fn iso(ms: i64) -> String {
    let (y, m, d, h, mi, s) = civil(ms);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// For `<input type="datetime-local">`: `2026-11-30T20:05` on the wall
/// clock `offset_minutes` east of UTC.
pub fn datetime_local(ms: i64, offset_minutes: i64) -> String {
    let (y, m, d, h, mi, _) = civil(ms + offset_minutes * 60_000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}")
}

/// Date and time of day, to the second.
fn civil(ms: i64) -> (i64, u32, u32, i64, i64, i64) {
    let secs = ms.div_euclid(1000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    (y, m, d, rest / 3600, rest % 3600 / 60, rest % 60)
}

/// `850 ms`, `2.4 s`, `3 min 5 s`.
pub fn duration_ms(ms: i64) -> String {
    match ms {
        ..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, ms % 60_000 / 1000),
    }
}

/// How far `at` is from `now`: "in 4 min", "12 s ago".
pub fn relative(at: i64, now: i64) -> String {
    let delta = (at - now) / 1000;
    let span = delta.unsigned_abs();
    if span == 0 {
        return "now".to_string();
    }
    let text = match span {
        0..=59 => format!("{span} s"),
        60..=3599 => format!("{} min", span / 60),
        3600..=172_799 => format!("{} h {} min", span / 3600, span % 3600 / 60),
        _ => format!("{} days", span / 86_400),
    };
    if delta >= 0 {
        format!("in {text}")
    } else {
        format!("{text} ago")
    }
}

/// `value` as one URL path segment: producers choose event ids, and an id
/// with `/`, `?`, `#` or `%` must still link to its own page.
pub fn path_segment(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value a `path_segment` names, decoded once. The router's own
/// parameters are decoded twice (leptos_router 0.8 unescapes a value when
/// it matches and again when the map is built), so an id holding `%41`
/// would come back as `A`: pages whose ids producers choose read the path
/// themselves.
pub fn from_path_segment(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A count with its thousands apart, as in "1 204 deliveries".
pub fn count(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

/// `1 delivery`, `1\u{202f}204 deliveries`.
pub fn deliveries(n: i64) -> String {
    match n {
        1 => "1 delivery".to_string(),
        n => format!("{} deliveries", count(n)),
    }
}

/// A duration, or a dash where there is none to show.
pub fn optional_ms(ms: Option<i64>) -> String {
    ms.map_or_else(|| "—".to_string(), duration_ms)
}
