//! The server's layers, as the README's folder map draws them: each
//! top-level module imports only modules of its own layer or below, the
//! two faces never import each other, and no two files of one folder
//! import each other. Read from the source itself, so a change that
//! breaks the shape fails here, not in review.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// Bottom first.
const LAYERS: &[&[&str]] = &[
    &["clock", "ids", "sealing", "auth", "telemetry"],
    &["store", "metrics"],
    &["jobs"],
    &["delivery"],
    &["config", "context"],
    &["accounts", "events", "endpoints", "replay", "error", "demo"],
    &["api", "dashboard"],
    &["startup", "cli"],
];

const FACES: [&str; 2] = ["api", "dashboard"];

fn layer(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| l.contains(&module))
        .unwrap_or_else(|| panic!("src/{module}: add it to a layer here and in the README"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without comments, which may name modules freely.
fn code(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The first names of the paths `prefix` starts: `prefix::a::…` and
/// `prefix::{a, b::c, …}`.
fn named_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
        let rest = &code[at + prefix.len()..];
        if let Some(list) = rest.strip_prefix('{') {
            let (mut depth, mut item) = (0, String::new());
            for c in list.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.insert(ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(c);
                }
            }
            names.insert(ident(&item));
        } else {
            names.insert(ident(rest));
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

#[test]
fn modules_import_only_their_layer_and_below_and_faces_not_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let top = rel.iter().next().unwrap().to_string_lossy();
        let top = top.trim_end_matches(".rs");
        if matches!(top, "lib" | "main") {
            continue;
        }
        for used in named_after(&code(file), "crate::") {
            if used == top {
                continue;
            }
            let upward = layer(&used) > layer(top);
            let face_to_face = FACES.contains(&top) && FACES.contains(&used.as_str());
            if upward || face_to_face {
                wrong.push(format!("{} imports crate::{used}", rel.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_two_files_of_a_folder_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // For each file, the files beside it (same parent module) it names.
    let mut uses: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for file in &files {
        let dir = file.parent().unwrap();
        for name in named_after(&code(file), "super::") {
            let sibling = dir.join(format!("{name}.rs"));
            if sibling.exists() && &sibling != file {
                uses.entry(file.clone()).or_default().insert(sibling);
            }
        }
    }
    let mut mutual = Vec::new();
    for (a, names) in &uses {
        for b in names {
            if a < b && uses.get(b).is_some_and(|n| n.contains(a)) {
                mutual.push(format!("{} <-> {}", a.display(), b.display()));
            }
        }
    }
    assert!(
        mutual.is_empty(),
        "import each other:\n{}",
        mutual.join("\n")
    );
}
