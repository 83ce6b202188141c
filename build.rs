// `sqlx::migrate!` embeds the migrations at compile time; without this a
// new migration file would not rebuild the binary that must run it.
//
// The Postgres halves of the tests are marked ignored, with the reason,
// when TEST_DATABASE_URL is unset at build time, so a run without
// Postgres says how many did not run instead of passing them silently.
use std::{
    env, fs,
    path::{Path, PathBuf},
};

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-env-changed=TEST_DATABASE_URL");
    println!("cargo::rustc-check-cfg=cfg(test_postgres)");
    if env::var("TEST_DATABASE_URL").is_ok_and(|u| !u.is_empty()) {
        println!("cargo:rustc-cfg=test_postgres");
    }
    embed_site();
}

/// The dashboard's files (`make site` writes them to target/site) go
/// inside every binary, debug ones too (rust-embed's `debug-embed`): the
/// browser tests run a copy of the test build's binary alone, so it has
/// to carry its files exactly as a release binary does.
///
/// The copy in OUT_DIR has brotli and gzip variants beside each text file
/// and the wasm (made here only where `make site` did not make them), and
/// is rewritten only where a file's content changed (a rewritten file,
/// even the same, would recompile this crate). `make` names the site's
/// digest in DAKGHAR_SITE_DIGEST, so the copy is refreshed exactly when it
/// changes; without it, any change to the folder refreshes it.
/// `--site-root` serves the folder itself instead.
fn embed_site() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let built = manifest.join("target").join("site");
    println!("cargo:rerun-if-env-changed=DAKGHAR_SITE_DIGEST");
    if env::var_os("DAKGHAR_SITE_DIGEST").is_none() && built.is_dir() {
        println!("cargo:rerun-if-changed={}", built.display());
    }
    let folder = out.join("site");
    mirror(&built, &folder).expect("copy target/site for embedding");
    let code = format!(
        "#[derive(rust_embed::Embed)]\n#[folder = {:?}]\n#[allow_missing = true]\npub struct Site;\n",
        folder.display().to_string()
    );
    fs::write(out.join("site.rs"), code).expect("write site.rs");
}

type Compress = fn(&[u8]) -> std::io::Result<Vec<u8>>;

/// The precompressed variants the server offers by Accept-Encoding.
const VARIANTS: [(&str, Compress); 2] = [(".br", brotli_best), (".gz", gzip_best)];

fn compressible(path: &Path) -> bool {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    ["js", "wasm", "css", "svg", "html", "json", "txt"].contains(&ext)
}

fn brotli_best(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: 11,
        ..Default::default()
    };
    brotli::BrotliCompress(&mut &data[..], &mut out, &params)?;
    Ok(out)
}

fn gzip_best(data: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(data)?;
    gz.finish()
}

/// Makes `to` hold what `from` holds (with variants), touching only files
/// that differ.
fn mirror(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    let mut wanted = std::collections::HashSet::new();
    if let Ok(entries) = fs::read_dir(from) {
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            wanted.insert(name.clone());
            let (src, dst) = (entry.path(), to.join(&name));
            if entry.file_type()?.is_dir() {
                if dst.is_file() {
                    fs::remove_file(&dst)?;
                }
                mirror(&src, &dst)?;
            } else {
                let data = fs::read(&src)?;
                if dst.is_dir() {
                    fs::remove_dir_all(&dst)?;
                }
                let changed = fs::read(&dst).ok().as_deref() != Some(&data[..]);
                if changed {
                    fs::write(&dst, &data)?;
                }
                if compressible(&dst) {
                    for (suffix, compress) in VARIANTS {
                        let mut name = name.clone();
                        name.push(suffix);
                        // `make site` writes the variants (natively, in
                        // seconds); they are then copied like any file.
                        if from.join(&name).is_file() {
                            continue;
                        }
                        let variant = to.join(&name);
                        if changed || !variant.is_file() {
                            fs::write(&variant, compress(&data)?)?;
                        }
                        wanted.insert(name);
                    }
                }
            }
        }
    }
    for entry in fs::read_dir(to)? {
        let entry = entry?;
        if !wanted.contains(&entry.file_name()) {
            if entry.file_type()?.is_dir() {
                fs::remove_dir_all(entry.path())?;
            } else {
                fs::remove_file(entry.path())?;
            }
        }
    }
    Ok(())
}
