//! Parsing of the kind lists stdworker reads from its environment (`STDWORKER_EXEC_KINDS`,
//! `STDWORKER_STARLARK_KINDS`, `STDWORKER_CEL_KINDS`, `STDWORKER_WASM_KINDS`).
//!
//! A list is comma-separated `kind` or `kind:version` entries (version defaults to 1). A
//! malformed list is a boot error naming the variable and the entry at fault, never a
//! silently shortened list: a worker that quietly serves fewer kinds than asked looks healthy
//! while that kind's resources wait forever.

use converge_proto::manifest::is_valid_kind_name;
use converge_sdk::{ConfigError, KindVersion};

/// The variable naming the kinds served by the exec provider.
pub const EXEC_KINDS_VAR: &str = "STDWORKER_EXEC_KINDS";

/// The variable naming the kinds served by the starlark provider.
pub const STARLARK_KINDS_VAR: &str = "STDWORKER_STARLARK_KINDS";

/// The variable naming the kinds served by the cel provider.
pub const CEL_KINDS_VAR: &str = "STDWORKER_CEL_KINDS";

/// The variable naming the kinds served by the wasm provider.
pub const WASM_KINDS_VAR: &str = "STDWORKER_WASM_KINDS";

/// Every provider's kind-list variable, in the order they are read.
pub const ALL_KINDS_VARS: [&str; 4] = [
    EXEC_KINDS_VAR,
    STARLARK_KINDS_VAR,
    CEL_KINDS_VAR,
    WASM_KINDS_VAR,
];

/// Parses a comma-separated `kind[:version]` list read from `var`.
///
/// Blank entries (a trailing comma) are skipped; an empty result is an error, as is an
/// invalid kind name, a version that is not an integer ≥ 1, or the same pair twice.
pub fn parse_kind_list(var: &str, value: &str) -> Result<Vec<KindVersion>, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid {
        var: var.to_string(),
        value: value.to_string(),
        reason,
    };
    let mut out: Vec<KindVersion> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (kind, version) = match entry.split_once(':') {
            None => (entry, 1),
            Some((kind, v)) => {
                let version: i32 = v.trim().parse().map_err(|_| {
                    invalid(format!(
                        "entry {entry:?}: version {v:?} is not an integer (expected kind or kind:version)"
                    ))
                })?;
                (kind.trim(), version)
            }
        };
        if !is_valid_kind_name(kind) {
            return Err(invalid(format!(
                "entry {entry:?}: {kind:?} is not a valid kind name (lowercase letters, digits, '-', '.', '_'; starting with a letter)"
            )));
        }
        if version < 1 {
            return Err(invalid(format!("entry {entry:?}: versions start at 1")));
        }
        let kv = KindVersion::new(kind, version);
        if out.contains(&kv) {
            return Err(invalid(format!("{kv} is listed twice")));
        }
        out.push(kv);
    }
    if out.is_empty() {
        return Err(invalid(
            "expected a comma-separated list of kind or kind:version".into(),
        ));
    }
    Ok(out)
}

/// Reads an optional kind list from the process environment: `Ok(None)` when `var` is unset
/// or blank.
pub fn kinds_from_env(var: &str) -> Result<Option<Vec<KindVersion>>, ConfigError> {
    match std::env::var(var) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => parse_kind_list(var, &v).map(Some),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError::NotUnicode {
            var: var.to_string(),
        }),
    }
}
