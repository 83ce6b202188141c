//! Which HTTP statuses are retried (chapter 004: "always configure the list
//! of status codes to retry explicitly"). A list of codes, ranges and
//! classes, `408,429,5xx` or `500-599`; a status outside it that is not a
//! 2xx fails the delivery at once (410 also pauses the endpoint). The
//! default is SPEC §4's table. Answers without a status (timeouts,
//! refused connections) are always retried.

use std::{fmt, ops::RangeInclusive, str::FromStr};

/// SPEC §4: everything but 2xx and 400, 401, 403, 410, 422.
pub const DEFAULT: &str = "1xx,3xx,402,404-409,411-421,423-499,5xx";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryStatuses(Vec<RangeInclusive<u16>>);

impl RetryStatuses {
    pub fn contains(&self, status: u16) -> bool {
        self.0.iter().any(|r| r.contains(&status))
    }
}

impl Default for RetryStatuses {
    fn default() -> Self {
        DEFAULT.parse().expect("the default list parses")
    }
}

impl FromStr for RetryStatuses {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        let mut ranges = Vec::new();
        for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            ranges.push(parse_part(part)?);
        }
        if ranges.is_empty() {
            return Err("the retry status list is empty: name at least one status, range (500-599) or class (5xx)".into());
        }
        ranges.sort_by_key(|r| *r.start());
        // Merged and in order, so equal lists print the same.
        let mut merged: Vec<RangeInclusive<u16>> = Vec::new();
        for r in ranges {
            match merged.last_mut() {
                Some(last) if *r.start() <= last.end().saturating_add(1) => {
                    *last = *last.start()..=(*last.end()).max(*r.end());
                }
                _ => merged.push(r),
            }
        }
        Ok(RetryStatuses(merged))
    }
}

fn parse_part(part: &str) -> Result<RangeInclusive<u16>, String> {
    let bad = || format!("{part:?} is not a status (429), a range (500-599) or a class (5xx)");
    let status = |s: &str| -> Result<u16, String> {
        match s.trim().parse::<u16>() {
            Ok(n) if (100..=999).contains(&n) => Ok(n),
            _ => Err(bad()),
        }
    };
    if let Some(class) = part.strip_suffix("xx").or_else(|| part.strip_suffix("XX")) {
        let digit = class.parse::<u16>().map_err(|_| bad())?;
        if !(1..=9).contains(&digit) || class.len() != 1 {
            return Err(bad());
        }
        return Ok(digit * 100..=digit * 100 + 99);
    }
    if let Some((from, to)) = part.split_once('-') {
        let (from, to) = (status(from)?, status(to)?);
        if from > to {
            return Err(bad());
        }
        return Ok(from..=to);
    }
    let n = status(part)?;
    Ok(n..=n)
}

/// The list in its shortest form: whole classes as `5xx`.
impl fmt::Display for RetryStatuses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Cut each range at class boundaries; whole classes print as
        // `5xx`, and the pieces between them join up again.
        let mut pieces: Vec<(u16, u16, bool)> = Vec::new();
        for r in &self.0 {
            let (mut from, to) = (*r.start(), *r.end());
            loop {
                let class_end = from - from % 100 + 99;
                let end = to.min(class_end);
                let whole = from % 100 == 0 && end == class_end;
                match pieces.last_mut() {
                    Some((_, last_end, false)) if !whole && *last_end + 1 == from => {
                        *last_end = end
                    }
                    _ => pieces.push((from, end, whole)),
                }
                if end >= to {
                    break;
                }
                from = end + 1;
            }
        }
        let parts: Vec<String> = pieces
            .into_iter()
            .map(|(from, to, whole)| match (whole, from == to) {
                (true, _) => format!("{}xx", from / 100),
                (false, true) => from.to_string(),
                (false, false) => format!("{from}-{to}"),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_merge_and_print_back() {
        let cases = [
            ("5xx", "5xx"),
            ("429, 408,5xx", "408,429,5xx"),
            ("500-599", "5xx"),
            ("500-503,502-504", "500-504"),
            (DEFAULT, DEFAULT),
            ("404-409,411-421,423-499", "404-409,411-421,423-499"),
            ("450-650", "450-499,5xx,600-650"),
            ("150-250", "150-250"),
            ("100-399", "1xx,2xx,3xx"),
            ("999", "999"),
        ];
        for (raw, shown) in cases {
            let list: RetryStatuses = raw.parse().unwrap();
            assert_eq!(list.to_string(), shown, "{raw}");
            assert_eq!(list.to_string().parse::<RetryStatuses>().unwrap(), list);
        }
    }

    #[test]
    fn bad_lists_say_what_is_wrong() {
        for raw in [
            "", " , ", "5x", "abc", "600-500", "99", "1000", "0xx", "55xx", "5xx-6xx",
        ] {
            let err = raw.parse::<RetryStatuses>().unwrap_err();
            assert!(!err.is_empty(), "{raw}");
        }
    }

    #[test]
    fn the_default_is_the_spec_table() {
        let d = RetryStatuses::default();
        for s in [
            100, 301, 402, 404, 405, 408, 409, 413, 429, 451, 500, 503, 599,
        ] {
            assert!(d.contains(s), "{s} retried");
        }
        for s in [200, 204, 400, 401, 403, 410, 422, 600] {
            assert!(!d.contains(s), "{s} not retried");
        }
    }
}
