//! Kinds have one home (issue 42): these tests read the tree's Rust sources and fail when a
//! second one grows back, which takes one line that review can miss.
//!
//! - Only `converge-kinds` parses a stored manifest or compiles a JSON Schema: no other
//!   crate's source calls the `jsonschema` crate or deserialises a `KindManifest` (the model's
//!   own crate, `proto`, may: its unit tests decode manifests they write), and no other
//!   crate depends on `jsonschema` but for its tests.
//! - Only the catalog's follower LISTENs on the manifest channel: the channel's name is
//!   spelt in exactly one place of the Rust tree, `kinds/src/catalog.rs`, which LISTENs once.

use std::path::{Path, PathBuf};

use converge_kinds::MANIFEST_CHANNEL;
use converge_testkit::source::{rust_files, strip_comments, strip_comments_and_strings};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository root")
        .to_path_buf()
}

/// `path` relative to the repository root, with `/` separators.
fn rel(path: &Path) -> String {
    path.strip_prefix(repo())
        .expect("a file of the repository")
        .to_string_lossy()
        .replace('\\', "/")
}

/// Every Rust source file of the tree (every workspace: the main one, stdworker, the
/// composers' and the WASM host's), with its path relative to the root.
fn sources() -> Vec<(String, String)> {
    let files = rust_files(&repo());
    assert!(files.len() > 100, "only {} Rust files found", files.len());
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{f:?}: {e}"));
            (rel(f), text)
        })
        .collect()
}

/// Whether `rel` is production or unit-test source of a crate (`<crate>/src/...`), as
/// opposed to an integration test, an example or a build script.
fn in_src(rel: &str) -> bool {
    rel.split('/').any(|part| part == "src")
        && !rel
            .split('/')
            .any(|part| part == "tests" || part == "examples")
}

/// The statements of `code` (split at `;`, `{` and `}`), for a check that looks at what one
/// statement does.
fn statements(code: &str) -> impl Iterator<Item = &str> {
    code.split([';', '{', '}'])
}

#[test]
fn only_the_catalog_parses_manifests_and_compiles_schemas() {
    let mut found = Vec::new();
    for (path, text) in sources() {
        if path.starts_with("kinds/") || !in_src(&path) {
            continue;
        }
        let code = strip_comments_and_strings(&text);
        if code.contains("jsonschema") {
            found.push(format!(
                "{path}: uses the jsonschema crate (compile and check through converge_kinds)"
            ));
        }
        if path.starts_with("proto/") {
            continue;
        }
        let decoders = [
            "from_value",
            "from_str",
            "from_slice",
            "from_reader",
            "deserialize",
        ];
        for s in statements(&code) {
            if s.contains("KindManifest") && decoders.iter().any(|d| s.contains(d)) {
                found.push(format!(
                    "{path}: decodes a KindManifest (`{}`): read kinds from the catalog",
                    s.split_whitespace().collect::<Vec<_>>().join(" ")
                ));
            }
        }
    }
    // Dependencies too: a crate that cannot name jsonschema cannot compile a schema.
    for manifest in ["broker", "control", "engine", "converge", "proto", "auth"] {
        let text = std::fs::read_to_string(repo().join(manifest).join("Cargo.toml")).unwrap();
        let deps = text
            .split("\n[")
            .find(|section| section.starts_with("dependencies]"))
            .unwrap_or_default();
        if deps
            .lines()
            .any(|l| l.trim_start().starts_with("jsonschema"))
        {
            found.push(format!(
                "{manifest}/Cargo.toml: depends on jsonschema (only converge-kinds may)"
            ));
        }
    }
    assert!(
        found.is_empty(),
        "a manifest is parsed or a schema compiled outside converge-kinds:\n{}",
        found.join("\n")
    );
}

/// The scan itself: it sees a decode and a compile written the usual ways, and not one in a
/// comment.
#[test]
fn the_scan_sees_what_it_looks_for() {
    let code = strip_comments_and_strings(
        "// serde_json::from_value::<KindManifest>(x)\n\
         let m: KindManifest = serde_json::from_value(row.manifest)?;\n\
         let v = jsonschema::validator_for(&s);",
    );
    assert!(
        statements(&code).any(|s| s.contains("KindManifest") && s.contains("from_value")),
        "{code}"
    );
    assert!(code.contains("jsonschema"));
    assert_eq!(
        statements(&code)
            .filter(|s| s.contains("KindManifest"))
            .count(),
        1
    );
    assert!(in_src("broker/src/compose.rs") && in_src("stdworker/src/sandbox/child.rs"));
    assert!(!in_src("converge/tests/e2e_hello.rs") && !in_src("sdk-rust/examples/x/src/main.rs"));
}

#[test]
fn one_listen_on_the_manifest_channel() {
    let mut spelt = Vec::new();
    for (path, text) in sources() {
        let code = strip_comments(&text);
        let n = code.matches(MANIFEST_CHANNEL).count();
        if n > 0 {
            spelt.push((path.clone(), n));
        }
        // Whoever names the constant listens through it: only the catalog may.
        if path != "kinds/src/catalog.rs"
            && path != "kinds/src/lib.rs"
            && !path.starts_with("kinds/tests/")
        {
            let code = strip_comments_and_strings(&text);
            assert!(
                !code.contains("MANIFEST_CHANNEL"),
                "{path} names the manifest channel: only the catalog's follower listens on it"
            );
        }
    }
    assert_eq!(
        spelt,
        [("kinds/src/catalog.rs".to_string(), 1)],
        "the manifest channel ({MANIFEST_CHANNEL}) must be spelt once, by the catalog: a second \
         LISTEN on it would be a second copy of the kinds to keep fresh"
    );
    let catalog = strip_comments_and_strings(
        &std::fs::read_to_string(repo().join("kinds/src/catalog.rs")).unwrap(),
    );
    let listens = catalog.matches("spawn_listen_notify").count()
        + catalog.matches("wake::listen").count()
        + catalog.matches("PgListener").count();
    let uses = catalog.matches("MANIFEST_CHANNEL").count();
    assert_eq!(
        (listens, uses),
        (1, 2),
        "kinds/src/catalog.rs: one LISTEN, on the constant it defines"
    );
}
