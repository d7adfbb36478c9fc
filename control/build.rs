//! Embeds the web UI's production build (`ui/dist`, made by `npm run build` in `ui/`) into the
//! `converge` binary: generates a table of (path, content type, bytes) in `$OUT_DIR`. When the
//! UI has not been built the table is empty and `/` serves a page saying how to build it, so
//! the Rust build never depends on Node.

use std::{
    env,
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
};

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let dist = manifest.join("../ui/dist");
    // Watched so a UI build made later is embedded by the next cargo build. A watched path
    // that does not exist makes cargo rerun this script on every build, and with it rebuild
    // converge-control and everything above it (on a fresh clone: every `cargo build` and
    // `cargo test` after the first, about 2 minutes each in CI). So an absent dist becomes
    // an empty one (git-ignored, ui/.gitignore); `vite build` fills it, and that reruns this.
    // Dated 1970: made now, it would be newer than this run and rerun it once more.
    if !dist.exists() && fs::create_dir_all(&dist).is_ok() {
        let _ = fs::File::open(&dist).and_then(|d| d.set_modified(std::time::UNIX_EPOCH));
    }
    println!("cargo:rerun-if-changed={}", dist.display());
    let mut files = Vec::new();
    walk(&dist, &mut files);
    files.sort();
    let mut code = String::from("/// The embedded UI files: (URL path, content type, bytes).\n");
    code.push_str("pub static UI_FILES: &[(&str, &str, &[u8])] = &[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let rel = f.strip_prefix(&dist).expect("under dist");
        let url = format!("/{}", rel.to_string_lossy().replace('\\', "/"));
        let abs = fs::canonicalize(f).expect("a readable file");
        writeln!(
            code,
            "    ({url:?}, {:?}, include_bytes!({:?})),",
            content_type(f),
            abs.display().to_string()
        )
        .expect("write to a string");
    }
    code.push_str("];\n");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets it")).join("ui_assets.rs");
    fs::write(out, code).expect("write the UI table");
}
