//! `docs/ARCHITECTURE.md` is checked against the code where it can be: every path it names
//! exists, every folder of the domain (and every module directly in a folder) is on its map,
//! and the rule "the domain knows no transport" holds in the domain's imports.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).expect("docs/ARCHITECTURE.md")
}

/// The code spans of `text` that are paths of the repository's source.
fn named_paths(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).filter(|span| span.starts_with("src/") && !span.contains(' ')).collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_path_the_architecture_names_exists() {
    let text = architecture();
    let named = named_paths(&text);
    assert!(named.len() > 40, "the map names the modules: {named:?}");
    let missing: Vec<&&str> = named.iter().filter(|p| !root().join(p).exists()).collect();
    assert!(missing.is_empty(), "docs/ARCHITECTURE.md names paths that do not exist: {missing:?}");
}

#[test]
fn every_folder_and_module_of_the_domain_is_on_the_map() {
    let text = architecture();
    let named = named_paths(&text);
    let domain = root().join("src/domain");
    let mut unnamed = Vec::new();
    // Each folder under the domain, and each module of the domain's top two levels.
    let mut check = |path: &Path| {
        let relative = path.strip_prefix(root()).expect("under the root").to_string_lossy().into_owned();
        let written = if path.is_dir() { format!("{relative}/") } else { relative.clone() };
        let in_a_named_folder = path.is_file()
            && path.parent().is_some_and(|p| {
                let folder = format!("{}/", p.strip_prefix(root()).expect("under the root").to_string_lossy());
                // A folder is its `mod.rs`; a folder named with none of its modules covers
                // them all (e.g. `src/domain/apps/`).
                let whole = !named.iter().any(|n| n.starts_with(&folder) && n.len() > folder.len());
                named.contains(&folder.as_str()) && (whole || path.ends_with("mod.rs"))
            });
        if !named.contains(&written.as_str()) && !in_a_named_folder {
            unnamed.push(written);
        }
    };
    for entry in std::fs::read_dir(&domain).expect("src/domain").flatten() {
        let path = entry.path();
        check(&path);
        if path.is_dir() {
            for inner in std::fs::read_dir(&path).expect("folder").flatten() {
                let inner = inner.path();
                if inner.is_dir() || inner.extension().is_some_and(|e| e == "rs") {
                    check(&inner);
                }
            }
        }
    }
    unnamed.sort();
    assert!(unnamed.is_empty(), "docs/ARCHITECTURE.md's map leaves out: {unnamed:?}");
}

/// Every folder of the domain says what it is for, in a module doc of its own.
#[test]
fn every_folder_of_the_domain_has_a_module_doc() {
    for entry in std::fs::read_dir(root().join("src/domain")).expect("src/domain").flatten() {
        if entry.path().is_dir() {
            let module = entry.path().join("mod.rs");
            let text = std::fs::read_to_string(&module).unwrap_or_default();
            assert!(text.starts_with("//! "), "{} has a module doc", module.display());
        }
    }
}

/// The domain imports neither the transports nor their libraries.
#[test]
fn the_domain_knows_no_transport() {
    let mut files = Vec::new();
    rust_files(&root().join("src/domain"), &mut files);
    let forbidden = ["crate::graphql", "crate::http", "async_graphql", "axum::"];
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if forbidden.iter().any(|f| code.contains(f)) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "the domain names a transport:\n{}", found.join("\n"));
}
