//! Where the secrets key comes from when none is configured: a key file,
//! created on first start with a fresh key and readable by its owner only.

use std::{
    fs,
    io::{self, Write},
    path::Path,
};

use super::SecretsKey;

/// Reads the key at `path`, or creates it. Several nodes starting at once
/// on one folder agree: the file appears complete or not at all.
pub fn load_or_create(path: &Path) -> Result<(SecretsKey, bool), String> {
    match fs::read_to_string(path) {
        Ok(text) => {
            let key = SecretsKey::from_base64(&text)
                .map_err(|e| format!("secrets key file {}: {e}", path.display()))?;
            return Ok((key, false));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(format!(
                "cannot read secrets key file {}: {e}",
                path.display()
            ))
        }
    }
    let (key, text) = SecretsKey::generate();
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let temp = dir.join(format!(".secrets-key-{}", crate::ids::random_token(12)));
    write_private(&temp, &text).map_err(|e| format!("cannot write {}: {e}", temp.display()))?;
    // A hard link fails if the name exists: whoever links first wins.
    let linked = fs::hard_link(&temp, path);
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok((key, true)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => load_or_create(path),
        Err(e) => Err(format!(
            "cannot create secrets key file {}: {e}",
            path.display()
        )),
    }
}

fn write_private(path: &Path, text: &str) -> io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_start_creates_a_private_key_and_later_ones_reuse_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/secrets.key");
        let (first, created) = load_or_create(&path).unwrap();
        assert!(created);
        let (again, created) = load_or_create(&path).unwrap();
        assert!(!created);
        let sealed = first.seal("ep", "whsec_x");
        assert_eq!(again.open("ep", &sealed).unwrap(), "whsec_x");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        fs::write(&path, "not a key").unwrap();
        let err = load_or_create(&path).unwrap_err();
        assert!(err.contains("32 bytes"), "{err}");
    }
}
