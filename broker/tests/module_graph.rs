//! Guards the broker's layering: the modules of `broker/src` must depend on each other
//! without a circle, so each part can be read, tested and changed from the bottom up (issue
//! 25 item 6). A circle creeps back in silently (one `use crate::...` is enough), so this
//! test reads the sources rather than trusting review.
//!
//! What counts as a dependency of a file's module:
//! - `crate::x` (also inside `use crate::{x, y::z}` groups): on module `x` when `src/x.rs` or
//!   `src/x/mod.rs` exists, else on the crate root `lib` (`crate::Broker` names lib.rs);
//! - `super::x` at the top of a module file: the same as `crate::x` (its parent is the root);
//!   inside an inline `mod tests { .. }` it means the file's own module, so it is no edge;
//! - in lib.rs, `mod x;` and any path starting `x::` for a module `x`: lib wires every part.
//!
//! Comments, strings and char literals are skipped, so prose that mentions `crate::x` or a
//! format string does not invent edges. Files under `src/x/` belong to module `x`.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
};

use converge_testkit::source::{is_ident, rust_files, strip_comments_and_strings as strip};

/// The module a source file belongs to: `lib`, or the first path segment under `src/`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("file under src");
    let first = rel.components().next().expect("non-empty path");
    let name = first.as_os_str().to_string_lossy();
    name.strip_suffix(".rs").unwrap_or(&name).to_string()
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Other,
}

fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if is_ident(ch) {
            let start = i;
            while i < c.len() && is_ident(c[i]) {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok::PathSep);
            i += 2;
        } else {
            out.push(match ch {
                '{' => Tok::Open,
                '}' => Tok::Close,
                ',' => Tok::Comma,
                _ => Tok::Other,
            });
            i += 1;
        }
    }
    out
}

/// The first segment of every item of the `{ .. }` group that starts at `toks[open]`.
fn group_heads(toks: &[Tok], open: usize) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut expect_head = true;
    for t in &toks[open..] {
        match t {
            Tok::Open => {
                depth += 1;
                if depth == 1 {
                    expect_head = true;
                }
            }
            Tok::Close => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            Tok::Comma if depth == 1 => expect_head = true,
            Tok::Ident(name) if depth == 1 && expect_head => {
                heads.push(name.clone());
                expect_head = false;
            }
            _ => {
                if depth == 1 {
                    expect_head = false;
                }
            }
        }
    }
    heads
}

/// The names a path rooted at `toks[at]` (`crate` or `super`) reaches first: one name, or
/// each head of a `{ .. }` group.
fn heads_after(toks: &[Tok], at: usize) -> Vec<String> {
    if toks.get(at + 1) != Some(&Tok::PathSep) {
        return Vec::new();
    }
    match toks.get(at + 2) {
        Some(Tok::Ident(name)) => vec![name.clone()],
        Some(Tok::Open) => group_heads(toks, at + 2),
        _ => Vec::new(),
    }
}

/// The modules `module` (whose source is `src`) depends on.
fn deps(module: &str, src: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let toks = tokens(&strip(src));
    let resolve = |name: &str| -> String {
        if modules.contains(name) {
            name.to_string()
        } else {
            "lib".to_string()
        }
    };
    let mut out = BTreeSet::new();
    // Brace depths at which an inline `mod name {` opened (its `super` is this file).
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    for (i, t) in toks.iter().enumerate() {
        match t {
            Tok::Open => {
                let is_mod = i >= 2
                    && toks[i - 2] == Tok::Ident("mod".into())
                    && matches!(toks[i - 1], Tok::Ident(_));
                depth += 1;
                if is_mod {
                    inline_mods.push(depth);
                }
            }
            Tok::Close => {
                if inline_mods.last() == Some(&depth) {
                    inline_mods.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(word) if word == "crate" => {
                out.extend(heads_after(&toks, i).iter().map(|h| resolve(h)));
            }
            // A module file's `super` is the crate root; an inline module's is the file.
            Tok::Ident(word) if word == "super" && inline_mods.is_empty() && module != "lib" => {
                out.extend(heads_after(&toks, i).iter().map(|h| resolve(h)));
            }
            Tok::Ident(word) if module == "lib" && modules.contains(word) => {
                let after_sep = i > 0 && toks[i - 1] == Tok::PathSep;
                let declared = i > 0 && toks[i - 1] == Tok::Ident("mod".into());
                let used = toks.get(i + 1) == Some(&Tok::PathSep);
                if !after_sep && (declared || used) {
                    out.insert(word.clone());
                }
            }
            _ => {}
        }
    }
    out.remove(module);
    out
}

/// A circle in `graph` as a closed path (`a -> b -> a`), if there is one (DFS, in name order
/// so the report is stable).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Active,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_string(), Mark::Active);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next) {
                Some(Mark::Active) => {
                    let from = path.iter().position(|p| p == next).expect("on the path");
                    let mut cycle = path[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
                None => {
                    if let Some(c) = visit(next, graph, marks, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if !marks.contains_key(node)
            && let Some(c) = visit(node, graph, &mut marks, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

fn graph_of(src_dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files = rust_files(src_dir);
    assert!(!files.is_empty(), "no source under {}", src_dir.display());
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(src_dir, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let module = module_of(src_dir, f);
        let text = fs::read_to_string(f).expect("read a source file");
        graph
            .entry(module.clone())
            .or_default()
            .extend(deps(&module, &text, &modules));
    }
    graph
}

fn show(graph: &BTreeMap<String, BTreeSet<String>>) -> String {
    graph
        .iter()
        .map(|(m, d)| {
            let d: Vec<&str> = d.iter().map(String::as_str).collect();
            format!("  {m} -> {}", d.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_broker_modules_form_a_dag() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph_of(&src);
    assert!(
        graph.contains_key("lib"),
        "no lib.rs under {}",
        src.display()
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "the broker's modules import each other in a circle: {}\nthe whole graph:\n{}",
            cycle.join(" -> "),
            show(&graph)
        );
    }
    println!("broker module graph:\n{}", show(&graph));
}

#[test]
fn the_reader_sees_the_edges_it_should() {
    let modules: BTreeSet<String> = ["lib", "a", "b", "c", "d"]
        .into_iter()
        .map(String::from)
        .collect();
    let src = r#"
        //! Mentions crate::d in prose, which is no edge.
        use crate::{a::{X, Y}, b, Broker};
        use super::c::Z;
        fn f() -> &'static str { let _q = 'x'; "crate::d" }
        #[cfg(test)]
        mod tests {
            use super::*;
        }
    "#;
    let got = deps("e", src, &modules);
    let want: BTreeSet<String> = ["a", "b", "c", "lib"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(got, want);

    let lib = "mod a;\npub mod b;\nfn f() { c::run(); x::d::y(); }";
    let want: BTreeSet<String> = ["a", "b", "c"].into_iter().map(String::from).collect();
    assert_eq!(deps("lib", lib, &modules), want);

    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    graph.insert("a".into(), ["b".to_string()].into());
    graph.insert("b".into(), ["c".to_string()].into());
    graph.insert("c".into(), ["a".to_string()].into());
    assert_eq!(
        find_cycle(&graph).map(|c| c.join(" -> ")),
        Some("a -> b -> c -> a".to_string())
    );
    graph.get_mut("c").expect("c").clear();
    assert_eq!(find_cycle(&graph), None);
}
