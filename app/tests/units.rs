//! The app crate's pure functions (time and number formatting, the JSON
//! viewer's colouring, what each role may do), tested from outside: as
//! `#[cfg(test)]` modules they made `make test` compile the whole crate,
//! pages and all, a second time.

mod format {
    use app::format::*;

    #[test]
    fn path_segments_round_trip_once() {
        for id in [
            "evt_1",
            "x/a?b=c#d%20e",
            "plain%41",
            "100%",
            "ünï cødé",
            "%zz",
        ] {
            assert_eq!(from_path_segment(&path_segment(id)), id, "{id}");
        }
        assert_eq!(from_path_segment("plain%2541"), "plain%41");
        assert_eq!(from_path_segment("bad%4"), "bad%4");
    }

    #[test]
    fn datetime_local_is_the_wall_clock_of_the_offset() {
        assert_eq!(datetime_local(951_782_400_000, 0), "2000-02-29T00:00");
        assert_eq!(datetime_local(951_782_400_000, -90), "2000-02-28T22:30");
        assert_eq!(datetime_local(951_782_459_999, 330), "2000-02-29T05:30");
    }

    #[test]
    fn times_in_utc() {
        assert_eq!(time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(time(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(time(1_796_000_000_123), "2026-11-30 00:53:20 UTC");
        assert_eq!(time(-1_000), "1969-12-31 23:59:59 UTC");
    }

    #[test]
    fn times_in_another_zone_and_for_machines() {
        let t = 1_796_000_000_123; // 2026-11-30 00:53:20 UTC
        assert_eq!(time_at_offset(t, 360), "2026-11-30 06:53:20 UTC+06:00");
        assert_eq!(time_at_offset(t, -330), "2026-11-29 19:23:20 UTC-05:30");
        assert_eq!(time_at_offset(t, 0), time(t));
        assert_eq!(iso(t), "2026-11-30T00:53:20Z");
    }

    #[test]
    fn durations_and_distances() {
        assert_eq!(duration_ms(42), "42 ms");
        assert_eq!(duration_ms(2_400), "2.4 s");
        assert_eq!(duration_ms(185_000), "3 min 5 s");
        assert_eq!(relative(61_000, 0), "in 1 min");
        assert_eq!(relative(0, 12_000), "12 s ago");
        assert_eq!(relative(7_200_000, 0), "in 2 h 0 min");
        assert_eq!(relative(500, 0), "now");
    }

    #[test]
    fn thousands_are_set_apart() {
        for (n, shown) in [
            (0, "0"),
            (999, "999"),
            (1204, "1\u{202f}204"),
            (1_000_000, "1\u{202f}000\u{202f}000"),
            (-4500, "-4\u{202f}500"),
        ] {
            assert_eq!(count(n), shown);
        }
    }
}

mod json_text {
    use app::json_text::*;

    /// Removes the whitespace the re-indenter may add (none inside strings).
    fn squeeze(pretty: &str) -> String {
        let mut out = String::new();
        let mut in_str = false;
        let mut escaped = false;
        for c in pretty.chars() {
            if in_str {
                out.push(c);
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => in_str = false,
                    _ => {}
                }
            } else if c == '"' {
                in_str = true;
                out.push(c);
            } else if !c.is_whitespace() {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn order_number_text_and_duplicate_keys_are_kept() {
        let raw = r#"{"b":1,"a":2,"n":12345678901234567890123,"a":3}"#;
        assert_eq!(
            pretty_text(raw),
            "{\n  \"b\": 1,\n  \"a\": 2,\n  \"n\": 12345678901234567890123,\n  \"a\": 3\n}"
        );
        assert_eq!(squeeze(&pretty_text(raw)), raw);
    }

    #[test]
    fn nesting_empty_containers_and_awkward_strings() {
        let cases = [
            (r#"[]"#, "[]"),
            (r#"{"a":{},"b":[ ]}"#, "{\n  \"a\": {},\n  \"b\": []\n}"),
            (
                r#"[1,[2,{"k":"v, with: \"quotes\" {}"}]]"#,
                "[\n  1,\n  [\n    2,\n    {\n      \"k\": \"v, with: \\\"quotes\\\" {}\"\n    }\n  ]\n]",
            ),
            (r#"{"x":1.50e+3,"y":-0.0}"#, "{\n  \"x\": 1.50e+3,\n  \"y\": -0.0\n}"),
            ("\"alone\"", "\"alone\""),
            (r#"{"s":"ünï\u00e9\\"}"#, "{\n  \"s\": \"ünï\\u00e9\\\\\"\n}"),
        ];
        for (raw, want) in cases {
            assert_eq!(pretty_text(raw), want, "{raw}");
        }
    }

    #[test]
    fn pieces_are_coloured_by_what_they_are() {
        let kinds: Vec<(Kind, String)> = pretty(r#"{"k":"v","n":-1,"t":true,"z":null}"#)
            .into_iter()
            .filter(|(k, _)| *k != Kind::Punct)
            .collect();
        let want = [
            (Kind::Key, "\"k\""),
            (Kind::Str, "\"v\""),
            (Kind::Key, "\"n\""),
            (Kind::Num, "-1"),
            (Kind::Key, "\"t\""),
            (Kind::Lit, "true"),
            (Kind::Key, "\"z\""),
            (Kind::Lit, "null"),
        ];
        assert_eq!(kinds.len(), want.len());
        for ((k, t), (wk, wt)) in kinds.iter().zip(want) {
            assert_eq!((*k, t.as_str()), (wk, wt));
        }
    }

    #[test]
    fn text_that_is_not_json_or_is_cut_short_keeps_every_token() {
        for raw in ["not json at all", "<p>a  b</p>", " 42 "] {
            assert_eq!(pretty_text(raw), raw);
        }
        for raw in [
            r#"{"error":"bad sig","detail":"the receiv"#,
            r#"{"a":[1,2"#,
            "}]",
        ] {
            assert_eq!(squeeze(&pretty_text(raw)), squeeze(raw), "{raw}");
        }
    }
}

mod roles {
    use app::model::roles::{AccountRole::*, Permission::*};

    #[test]
    fn each_role_may_what_the_spec_says() {
        let table = [
            (Owner, [true, true, true, true, true]),
            (Developer, [true, true, true, false, false]),
            (Viewer, [true, false, false, false, false]),
        ];
        for (role, allowed) in table {
            for (p, want) in [Read, Change, SeeSecrets, ManageTeam, ManageKeys]
                .into_iter()
                .zip(allowed)
            {
                assert_eq!(role.allows(p), want, "{role:?} {p:?}");
            }
        }
    }
}
