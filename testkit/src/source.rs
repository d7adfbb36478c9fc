//! Reading the tree's Rust sources in a test: every `.rs` file under a directory, and its
//! code without its prose. For the tests that guard the code's shape by reading it (the
//! broker's module graph, the kinds' one home, the one LISTEN on the manifest channel),
//! since a dependency or a second copy creeps back in with one line that review can miss.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively, sorted; build output (`target`), installed
/// packages (`node_modules`) and hidden directories are skipped.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                    todo.push(path);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Rust source with its comments removed and its string and char literals replaced by
/// placeholders: what the code names, without what its prose and messages mention (a path in
/// a doc comment or a format string is not a dependency).
pub fn strip_comments_and_strings(src: &str) -> String {
    strip(src, false)
}

/// Rust source with its comments removed, string literals kept: what the code says,
/// including the names it spells in strings (a channel it LISTENs on), without its prose.
pub fn strip_comments(src: &str) -> String {
    strip(src, true)
}

fn strip(src: &str, keep_strings: bool) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < c.len() {
        // Line comment (also `///` and `//!`).
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
            continue;
        }
        // Block comment, nested as Rust nests them.
        if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            continue;
        }
        // Raw string: r"..", r#".."#, br#".."# (the `b` was already copied; harmless).
        if c[i] == 'r' && (i == 0 || !is_ident(c[i - 1])) {
            let mut j = i + 1;
            while c.get(j) == Some(&'#') {
                j += 1;
            }
            if c.get(j) == Some(&'"') {
                let hashes = j - i - 1;
                j += 1;
                let from = j;
                let to = loop {
                    if j >= c.len() {
                        break j;
                    }
                    if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
                        let end = j;
                        j += 1 + hashes;
                        break end;
                    }
                    j += 1;
                };
                push_literal(&mut out, &c[from..to], keep_strings);
                i = j;
                continue;
            }
        }
        if c[i] == '"' {
            i += 1;
            let from = i;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            let to = i.min(c.len());
            i += 1;
            push_literal(&mut out, &c[from..to], keep_strings);
            continue;
        }
        // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
        if c[i] == '\'' {
            if c.get(i + 1) == Some(&'\\') {
                let mut j = i + 2;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str(" ' ");
                continue;
            }
            if c.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str(" ' ");
                continue;
            }
        }
        out.push(c[i]);
        i += 1;
    }
    out
}

/// A string literal's text as `strip` writes it: quoted when kept, else empty quotes.
fn push_literal(out: &mut String, text: &[char], keep: bool) {
    out.push_str(" \"");
    if keep {
        out.extend(text);
    }
    out.push_str("\" ");
}

/// Whether `c` may be part of a Rust identifier.
pub fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}
