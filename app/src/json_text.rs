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
