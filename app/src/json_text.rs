//! JSON as it was sent, made readable without changing it. A parser
//! would sort or merge keys, round big numbers and drop duplicates, and a
//! customer checking a signature over what the page shows would get a
//! mismatch; this works on the text itself: only whitespace between
//! tokens changes, and every token keeps its exact characters.

/// What a piece of the pretty text is, for its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Key,
    Str,
    Num,
    /// `true`, `false`, `null`.
    Lit,
    /// Brackets, braces, commas, colons, indentation, and anything that is
    /// not JSON (kept as it is).
    Punct,
}

impl Kind {
    pub fn class(self) -> &'static str {
        match self {
            Kind::Key => "j-key",
            Kind::Str => "j-str",
            Kind::Num => "j-num",
            Kind::Lit => "j-lit",
            Kind::Punct => "j-punct",
        }
    }
}

/// The text re-indented by two spaces, in coloured pieces whose
/// concatenation is the pretty text. Text that is not JSON (or is cut
/// short, like a response snippet) comes out with its tokens intact.
pub fn pretty(raw: &str) -> Vec<(Kind, String)> {
    // Not an object or array (HTML, plain text, a bare value): as it is.
    if !raw.trim_start().starts_with(['{', '[']) {
        return vec![(Kind::Punct, raw.to_string())];
    }
    let mut out = Pieces::default();
    let mut depth = 0usize;
    let mut chars = raw.char_indices().peekable();
    // Whether the last token opened a container, so `{}` stays on one line.
    let mut just_opened = false;
    while let Some((start, c)) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => continue,
            '{' | '[' => {
                if just_opened {
                    out.newline(depth);
                }
                out.push(Kind::Punct, c.to_string());
                depth += 1;
                just_opened = true;
                continue;
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                if !just_opened {
                    out.newline(depth);
                }
                out.push(Kind::Punct, c.to_string());
            }
            ',' => {
                out.push(Kind::Punct, ",".into());
                out.newline(depth);
                just_opened = false;
                continue;
            }
            ':' => out.push(Kind::Punct, ": ".into()),
            '"' => {
                if just_opened {
                    out.newline(depth);
                }
                let mut end = raw.len();
                let mut escaped = false;
                for (i, c) in chars.by_ref() {
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '"') => {
                            end = i + 1;
                            break;
                        }
                        _ => {}
                    }
                }
                let text = &raw[start..end];
                let is_key = raw[end..].trim_start().starts_with(':');
                out.push(if is_key { Kind::Key } else { Kind::Str }, text.into());
            }
            _ => {
                if just_opened {
                    out.newline(depth);
                }
                let mut end = raw.len();
                while let Some(&(i, c)) = chars.peek() {
                    if matches!(
                        c,
                        ' ' | '\t' | '\n' | '\r' | ',' | ':' | '{' | '}' | '[' | ']' | '"'
                    ) {
                        end = i;
                        break;
                    }
                    chars.next();
                }
                let text = &raw[start..end];
                let kind = match text {
                    "true" | "false" | "null" => Kind::Lit,
                    t if t.starts_with(|c: char| c == '-' || c.is_ascii_digit()) => Kind::Num,
                    _ => Kind::Punct,
                };
                out.push(kind, text.into());
            }
        }
        just_opened = false;
    }
    out.0
}

/// The pretty text as one string.
pub fn pretty_text(raw: &str) -> String {
    pretty(raw).into_iter().map(|(_, t)| t).collect()
}

#[derive(Default)]
struct Pieces(Vec<(Kind, String)>);

impl Pieces {
    fn push(&mut self, kind: Kind, text: String) {
        match self.0.last_mut() {
            Some((k, t)) if *k == kind && kind == Kind::Punct => t.push_str(&text),
            _ => self.0.push((kind, text)),
        }
    }

    fn newline(&mut self, depth: usize) {
        self.push(Kind::Punct, format!("\n{}", "  ".repeat(depth)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
