//! ARCHITECTURE.md agrees with the tree: every relative link resolves, its engine function
//! map lists exactly the functions each engine file defines, and every "`function`
//! [file.sql](engine/sql/file.sql)" pair in the text names the file that defines it. A moved
//! file or a function moved between families then fails here instead of misleading a reader.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository root")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// The names of the functions `sql` creates (`CREATE [OR REPLACE] FUNCTION name`).
fn functions_in(sql: &str) -> Vec<String> {
    let lower = sql.to_lowercase();
    let mut out = Vec::new();
    for (at, _) in lower.match_indices("function ") {
        let before = lower[..at].trim_end();
        if !(before.ends_with("create") || before.ends_with("or replace")) {
            continue;
        }
        let name: String = lower[at + "function ".len()..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

/// Function name → the file defining it (`engine/sql/x.sql` or the baseline).
fn definitions() -> BTreeMap<String, String> {
    let mut defs = BTreeMap::new();
    let dir = repo().join("engine/sql");
    for entry in std::fs::read_dir(&dir).expect("read engine/sql") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|x| x == "sql") {
            let rel = format!("engine/sql/{}", path.file_name().unwrap().to_string_lossy());
            for f in functions_in(&read(&rel)) {
                defs.insert(f, rel.clone());
            }
        }
    }
    for f in functions_in(&read("migrations/0001_baseline.sql")) {
        defs.insert(f, "migrations/0001_baseline.sql".into());
    }
    defs
}

/// Every markdown link target `](target)` in `text`, without its `#fragment`.
fn links(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            let end = rest.find(')')?;
            let target = rest[..end].split('#').next().unwrap_or_default();
            Some(target.to_string())
        })
        .filter(|t| !t.is_empty() && !t.contains("://") && !t.starts_with("mailto:"))
        .collect()
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for doc in ["ARCHITECTURE.md", "README.md", "engine/sql/README.md"] {
        let base = repo().join(doc);
        let base = base.parent().unwrap();
        for target in links(&read(doc)) {
            if !base.join(&target).exists() {
                broken.push(format!("{doc}: {target}"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to paths that do not exist (a file moved? update the document):\n{}",
        broken.join("\n")
    );
}

/// The backticked names in `cell`.
fn backticked(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_function_map_lists_each_files_functions() {
    let doc = read("ARCHITECTURE.md");
    let start = doc
        .find("## Engine function map")
        .expect("ARCHITECTURE.md has an engine function map");
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let defs = definitions();
    let mut listed = BTreeSet::new();
    let mut problems = Vec::new();
    for row in section.lines().filter(|l| l.starts_with("| [")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let file = links(cells[1]).pop().expect("the row links its file");
        let want: BTreeSet<String> = defs
            .iter()
            .filter(|(_, f)| **f == file)
            .map(|(n, _)| n.clone())
            .collect();
        let have = backticked(cells[3]);
        if have != want {
            problems.push(format!(
                "{file}: the map lists {have:?}, the file defines {want:?}"
            ));
        }
        listed.insert(file);
    }
    let files: BTreeSet<String> = defs.values().cloned().collect();
    for file in files.difference(&listed) {
        problems.push(format!(
            "{file} defines functions but has no row in the map"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn each_function_named_with_a_file_is_defined_there() {
    let doc = read("ARCHITECTURE.md");
    let defs = definitions();
    let mut wrong = Vec::new();
    // A run of backticked names (joined by ", " / " and " / " or ") followed within a few
    // characters by a link into engine/sql names the file that defines each of them.
    for (at, _) in doc.match_indices("](engine/sql/") {
        let file_end = doc[at + 2..].find(')').map(|i| at + 2 + i).unwrap();
        let file = &doc[at + 2..file_end];
        let open = doc[..at].rfind('[').unwrap();
        let before = &doc[..open];
        let trimmed = before.trim_end_matches([' ', '(', '\n']);
        if !trimmed.ends_with('`') {
            continue;
        }
        // Walk back over `a`, `b` and `c` forms.
        let mut names = Vec::new();
        let mut rest = trimmed;
        while let Some(stripped) = rest.strip_suffix('`') {
            let Some(open_tick) = stripped.rfind('`') else {
                break;
            };
            names.push(stripped[open_tick + 1..].to_string());
            rest = &stripped[..open_tick];
            let joined = [", ", " and ", " or ", ",\n", " / "]
                .iter()
                .find_map(|sep| rest.strip_suffix(sep));
            match joined {
                Some(r) => rest = r,
                None => break,
            }
        }
        for name in names {
            if let Some(def) = defs.get(&name)
                && def != file
            {
                wrong.push(format!("`{name}` is linked to {file} but defined in {def}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
