//! Internationalised host names that pass for another name: `pаypal.com`
//! with a Cyrillic `а`, or `аррӏе.com` written wholly in Cyrillic letters
//! that look Latin. Browsers show such hosts as punycode; an endpoint URL
//! that a teammate reads in the dashboard must not deceive either.

use std::collections::HashSet;

use unicode_script::{Script, UnicodeScript};

/// Cyrillic and Greek letters that render like Latin ones.
const LOOK_LATIN: &str = "аԁеһіјӏорԛѕսԝхуАВЕНІЈКМОРЅТХУЬсСкԜԌαβεικνορτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ";

/// Why `host` (as in the URL: punycode allowed) is refused, if it is.
pub fn refuse(host: &str) -> Option<String> {
    let (unicode, decoded) = idna::domain_to_unicode(host);
    if decoded.is_err() {
        return Some(format!(
            "host {host:?} is not a valid internationalised name"
        ));
    }
    for label in unicode.split('.').filter(|l| !l.is_ascii()) {
        let scripts: HashSet<Script> = label
            .chars()
            .map(|c| c.script())
            .filter(|s| !matches!(s, Script::Common | Script::Inherited))
            .collect();
        let confusable = [Script::Latin, Script::Cyrillic, Script::Greek];
        let mixed = scripts.iter().filter(|s| confusable.contains(s)).count() > 1;
        if mixed {
            return Some(format!(
                "host label {label:?} mixes Latin, Cyrillic or Greek letters: it could pass for another name"
            ));
        }
        let letters: Vec<char> = label.chars().filter(|c| c.is_alphabetic()).collect();
        let all_look_latin = !letters.is_empty()
            && !scripts.contains(&Script::Latin)
            && letters.iter().all(|c| LOOK_LATIN.contains(*c));
        if all_look_latin {
            return Some(format!(
                "host label {label:?} is written in letters that look Latin: it could pass for another name"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::refuse;

    #[test]
    fn look_alikes_are_refused_and_real_names_pass() {
        for host in [
            "xn--pypal-4ve.com",    // pаypal with a Cyrillic а
            "xn--80ak6aa92e.com",   // аррӏе, all Cyrillic
            "xn--mple-43d3a6i.com", // ехаmple: Cyrillic е, х, а beside Latin
        ] {
            assert!(refuse(host).is_some(), "{host}");
        }
        for host in [
            "hooks.example.com",
            "xn--mller-kva.de",   // müller.de
            "xn--d1aqf.xn--p1ai", // дом.рф: Cyrillic, not all look-alikes
            "xn--wgv71a119e.jp",  // 日本語.jp
            "127.0.0.1",
        ] {
            assert_eq!(refuse(host), None, "{host}");
        }
    }
}
