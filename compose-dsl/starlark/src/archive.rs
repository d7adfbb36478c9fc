//! Reads a bundle zip into memory: strict paths, entry and size caps, `.star` files only.

use std::{
    collections::BTreeMap,
    io::{Cursor, Read},
};

use crate::{Error, LimitKind, Limits};

/// Checks a bundle path (`lib/net.star`): relative, `/`-separated, no empty, `.` or `..`
/// segments, no backslashes, colons or control characters. Used for zip entries and for the
/// first argument of `load()`, so both name files the same way.
pub(crate) fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("empty path".into());
    }
    if path.starts_with('/') {
        return Err(format!(
            "{path:?} is absolute; bundle paths are relative to its root"
        ));
    }
    if path
        .chars()
        .any(|c| c == '\\' || c == ':' || c.is_control())
    {
        return Err(format!(
            "{path:?} contains a backslash, colon or control character"
        ));
    }
    if path
        .split('/')
        .any(|seg| seg.is_empty() || seg == "." || seg == "..")
    {
        return Err(format!("{path:?} has an empty, '.' or '..' segment"));
    }
    Ok(())
}

/// The `.star` sources of a bundle, keyed by their path inside it.
///
/// Entries that are directories are skipped; entries that are not `.star` files are counted
/// against the caps and ignored (a bundle may carry a README). Symlinks are rejected.
pub(crate) fn read_sources(
    bytes: &[u8],
    limits: &Limits,
) -> Result<BTreeMap<String, String>, Error> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| Error::bundle(format!("not a zip archive: {e}")))?;
    if zip.len() > limits.max_bundle_entries {
        return Err(Error::Limit(LimitKind::BundleEntries));
    }
    let mut total: u64 = 0;
    let mut sources = BTreeMap::new();
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| Error::bundle(format!("zip entry {i}: {e}")))?;
        let name = entry
            .name()
            .map_err(|e| Error::bundle(format!("zip entry {i}: {e}")))?
            .into_owned();
        if entry.is_symlink() {
            return Err(Error::bundle(format!("{name:?} is a symlink")));
        }
        if entry.is_dir() {
            check_path(name.trim_end_matches('/')).map_err(Error::Bundle)?;
            continue;
        }
        check_path(&name).map_err(Error::Bundle)?;
        // The declared size may lie (zip bombs): read at most one byte past the cap.
        let mut buf = Vec::new();
        (&mut entry)
            .take(limits.max_file_bytes + 1)
            .read_to_end(&mut buf)
            .map_err(|e| Error::bundle(format!("{name:?}: {e}")))?;
        if buf.len() as u64 > limits.max_file_bytes {
            return Err(Error::Limit(LimitKind::BundleSize));
        }
        total += buf.len() as u64;
        if total > limits.max_bundle_bytes {
            return Err(Error::Limit(LimitKind::BundleSize));
        }
        if !name.ends_with(".star") {
            continue;
        }
        let text =
            String::from_utf8(buf).map_err(|_| Error::bundle(format!("{name:?} is not UTF-8")))?;
        if sources.insert(name.clone(), text).is_some() {
            return Err(Error::bundle(format!("{name:?} appears twice")));
        }
    }
    Ok(sources)
}

/// Packs `(path, source)` pairs into a deflated zip: the bundle format [`crate::Bundle`]
/// reads. For tests, fixtures and tools that build bundles.
pub fn pack(files: &[(&str, &str)]) -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (path, src) in files {
        zip.start_file(*path, options).expect("writing to memory");
        zip.write_all(src.as_bytes()).expect("writing to memory");
    }
    zip.finish().expect("writing to memory").into_inner()
}

/// Packs the files under `dir` (recursively, `/`-separated paths from `dir`, in name order)
/// into a bundle, as `pack` does: how a bundle kept as a directory reaches the engine (the
/// datadriven example's `starlark/`, `conctl render --bundle DIR`). A symlink, a file that
/// is not UTF-8, or more than `max_files` files is an error naming it.
pub fn pack_dir(dir: &std::path::Path, max_files: usize) -> Result<Vec<u8>, String> {
    fn walk(
        root: &std::path::Path,
        dir: &std::path::Path,
        out: &mut Vec<(String, String)>,
        max_files: usize,
    ) -> Result<(), String> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for e in entries {
            let path = e.path();
            let kind = e
                .file_type()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if kind.is_symlink() {
                return Err(format!(
                    "{}: a bundle may not hold symlinks",
                    path.display()
                ));
            }
            if kind.is_dir() {
                walk(root, &path, out, max_files)?;
                continue;
            }
            if out.len() >= max_files {
                return Err(format!("{}: more than {max_files} files", root.display()));
            }
            let rel = path
                .strip_prefix(root)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("{}: {e} (bundle files are UTF-8 text)", path.display()))?;
            out.push((rel, text));
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files, max_files)?;
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, s)| (p.as_str(), s.as_str()))
        .collect();
    Ok(pack(&refs))
}

#[cfg(test)]
mod tests {
    use super::check_path;

    #[test]
    fn paths() {
        for ok in ["compose.star", "lib/net.star", "a/b/c.star"] {
            assert!(check_path(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/etc/x.star",
            "../x.star",
            "lib/../x.star",
            "./x.star",
            "a//b.star",
            "a\\b.star",
            "c:/x.star",
            "a/\0.star",
        ] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
    }
}
