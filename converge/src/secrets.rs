//! `converge secrets rotate|status` and the key `converge dev` makes for itself.
//!
//! A rotation re-seals, under the current key, every provider config value that is sealed
//! under another key or stored in plain text where its kind's config_schema says writeOnly
//! (written before secrets were sealed). It reads the configs in name order, a page at a
//! time, and rewrites a config only if it is still as read (a concurrent write wins; the
//! config is read again and retried). Running it again finds nothing to do. A value no
//! configured key opens is reported by config name and pointer (never the value) and makes
//! the command exit non-zero; the rest are still rotated.
//!
//! The order that keeps every value readable: start every converge process with the new key
//! as `SECRETS_KEY_FILE` and the old one in `SECRETS_OLD_KEY_FILES`, run `converge secrets
//! rotate`, then drop the old key.

use std::{
    collections::BTreeMap,
    io::Write,
    path::{Path, PathBuf},
};

use anyhow::Context;
use converge_engine::{
    db::providerconfigs::{self, StoredSpec},
    sealing::{self, Keyring},
};
use converge_kinds::KindCatalog;
use serde_json::Value;
use sqlx::PgPool;

/// How many configs a rotation reads at once.
pub const PAGE: i64 = 100;
/// How often a config written concurrently is read again before the rotation gives up on it.
const RETRIES: usize = 5;

/// The key file of `converge dev` under `data_dir` (`secrets.key`, base64), made on first use
/// with mode 0600, so a dev install seals its secrets as a server does.
pub fn dev_key_file(data_dir: &Path) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let path = data_dir.join("secrets.key");
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(mut f) => {
            writeln!(f, "{}", sealing::new_key_base64())
                .and_then(|()| f.sync_all())
                .with_context(|| format!("writing {}", path.display()))?;
            tracing::info!(file = %path.display(), "made a secrets key for converge dev");
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
    }
    Ok(path)
}

/// What one pass over the configs found (and, rotating, did).
#[derive(Debug, Default)]
pub struct Report {
    /// Configs read.
    pub configs: usize,
    /// Sealed values per key id, as found.
    pub by_key: BTreeMap<String, usize>,
    /// writeOnly values found in plain text.
    pub plain: usize,
    /// Configs that need (or, rotating, got) a re-seal.
    pub resealed: usize,
    /// Values no configured key opens: `config <name>: <pointer>: <why>`.
    pub failures: Vec<String>,
}

/// Reads every config and, when `write`, re-seals the ones not wholly under the current
/// key. Progress goes to `out` a page at a time.
pub async fn scan(
    pool: &PgPool,
    keys: &Keyring,
    write: bool,
    out: &mut impl Write,
) -> anyhow::Result<Report> {
    let current = keys.current_id().map(str::to_string);
    if write && current.is_none() {
        anyhow::bail!(
            "a rotation seals under the current key: set {} or {} (and the old keys in {})",
            sealing::KEY_FILE_VAR,
            sealing::KEY_COMMAND_VAR,
            sealing::OLD_KEY_FILES_VAR
        );
    }
    let catalog = KindCatalog::new();
    catalog
        .reload(pool)
        .await
        .context("loading kind manifests")?;
    let mut report = Report::default();
    let mut after = String::new();
    loop {
        let page = providerconfigs::specs_after(pool, &after, PAGE)
            .await
            .context("reading provider configs")?;
        let Some(last) = page.last() else { break };
        after = last.0.clone();
        let resealed_before = report.resealed;
        for row in page {
            report.configs += 1;
            let mut row = row;
            for attempt in 0.. {
                let Some(new) = examine(&catalog, keys, &row, &mut report, attempt == 0) else {
                    break;
                };
                if !write {
                    report.resealed += 1;
                    break;
                }
                if providerconfigs::replace_spec(pool, &row.0, &row.3, &new)
                    .await
                    .context("re-sealing a provider config")?
                {
                    report.resealed += 1;
                    break;
                }
                if attempt == RETRIES {
                    report.failures.push(format!(
                        "config {}: changed {RETRIES} times while it was re-sealed; run again",
                        row.0
                    ));
                    break;
                }
                match providerconfigs::spec_of(pool, &row.0)
                    .await
                    .context("reading a provider config")?
                {
                    Some(fresh) => row = fresh,
                    None => break,
                }
            }
        }
        if write {
            writeln!(
                out,
                "read {} configs, re-sealed {} (this page {})",
                report.configs,
                report.resealed,
                report.resealed - resealed_before
            )?;
        }
    }
    Ok(report)
}

/// Counts `row`'s values into `report` (when `count`: a config read again is not counted
/// twice) and answers its spec re-sealed under the current key when it needs that: a
/// value sealed under another key, or a writeOnly value in plain text. A value that does
/// not open is a failure and leaves the config as it is.
fn examine(
    catalog: &KindCatalog,
    keys: &Keyring,
    (name, kind, version, spec): &StoredSpec,
    report: &mut Report,
    count: bool,
) -> Option<Value> {
    let current = keys.current_id();
    let found = sealing::envelopes(spec);
    let mut opened = spec.clone();
    let failed = keys.open_config(kind, &mut opened);
    let info = catalog.get(kind, *version);
    let declared = info
        .as_ref()
        .map(|k| k.config_secret_pointers(&opened))
        .unwrap_or_default();
    let plain: Vec<&String> = declared
        .iter()
        .filter(|p| {
            !found.iter().any(|(e, _)| e == *p)
                && spec.pointer(p).is_some_and(|v| !sealing::is_blank(v))
        })
        .collect();
    if count {
        for (_, kid) in &found {
            *report.by_key.entry(kid.clone()).or_default() += 1;
        }
        report.plain += plain.len();
        report.failures.extend(
            failed
                .iter()
                .map(|e| format!("config {name}: {}: {}", e.pointer, e.reason)),
        );
    }
    let stale = found.iter().any(|(_, kid)| Some(kid.as_str()) != current);
    if !failed.is_empty() || (!stale && plain.is_empty()) {
        return None;
    }
    // Sealed again where it was sealed, and wherever the schema now says writeOnly.
    let mut pointers: Vec<String> = found.into_iter().map(|(p, _)| p).collect();
    pointers.extend(declared);
    let mut resealed = opened;
    keys.seal_config(
        kind,
        &mut resealed,
        &converge_kinds::secrets::outermost(pointers),
    )
    .ok()?;
    Some(resealed)
}

/// Prints `report` (`status`: what a rotation would do).
pub fn print(
    report: &Report,
    keys: &Keyring,
    status: bool,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let current = keys.current_id();
    writeln!(out, "{} provider configs", report.configs)?;
    for (kid, n) in &report.by_key {
        let what = if Some(kid.as_str()) == current {
            "current key"
        } else if keys.ids().contains(&kid.as_str()) {
            "old key, configured"
        } else {
            "NOT CONFIGURED"
        };
        writeln!(out, "  key {kid}: {n} sealed values ({what})")?;
    }
    writeln!(out, "  plain text: {} writeOnly values", report.plain)?;
    if status {
        writeln!(out, "a rotation would re-seal {} configs", report.resealed)?;
    } else {
        writeln!(out, "re-sealed {} configs", report.resealed)?;
    }
    for f in &report.failures {
        writeln!(out, "cannot open: {f}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dev_key_is_made_once_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("converge-devkey-{}", std::process::id()));
        let path = dev_key_file(&dir).unwrap();
        let first = std::fs::read(&path).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(sealing::Key::parse("t", &first).is_ok());
        assert_eq!(dev_key_file(&dir).unwrap(), path);
        assert_eq!(std::fs::read(&path).unwrap(), first);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
