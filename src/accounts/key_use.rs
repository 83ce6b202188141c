//! API key names: what a key is for, as its creator typed it. (When each
//! was last used is `store::KeyUses`.)

/// A key's name as its creator typed it: trimmed, one line, short.
pub fn checked_name(raw: &str) -> crate::error::Result<String> {
    let name = raw.trim();
    if name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(crate::error::Error::invalid(
            "invalid_key_name",
            "a key's name is one line of at most 100 characters",
        ));
    }
    Ok(name.to_string())
}
