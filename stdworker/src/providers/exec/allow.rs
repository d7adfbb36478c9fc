//! What an exec kind may run: `STDWORKER_EXEC_ALLOW` (which programs may start at all) and
//! the rule that a per-resource provider-config override may set only `settings`.
//!
//! Both close the same door: a providerconfig is data anyone with API access to it can
//! write, and without these checks writing one is running a command on every stdworker host.
//! Programs are compared by canonical path (symlinks and `..` resolved on both sides), so a
//! link inside an allowed directory that points elsewhere is outside it.

use std::{
    collections::BTreeSet,
    io,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use converge_sdk::{ConfigError, HandlerError};
use serde_json::Value;

/// The variable listing the programs (absolute paths) and directories exec kinds may run.
pub const EXEC_ALLOW_VAR: &str = "STDWORKER_EXEC_ALLOW";

/// The only key a per-resource override of an exec kind may carry.
pub const OVERRIDABLE: &str = "settings";

/// The value of [`EXEC_ALLOW_VAR`] that lets exec kinds run any program, on purpose (a
/// laptop, `converge dev`'s demos); warned at every start.
pub const ANY_PROGRAM: &str = "*";

/// The programs exec kinds may start, canonicalised at boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecAllow {
    /// [`ANY_PROGRAM`]: every program may run.
    any: bool,
    /// Exact programs.
    programs: BTreeSet<PathBuf>,
    /// Directories: every program under one (at any depth) is allowed.
    dirs: Vec<PathBuf>,
}

impl ExecAllow {
    /// Parses a comma-separated list of absolute program paths or directories read from
    /// `var`, or [`ANY_PROGRAM`]. Every entry must exist (it is canonicalised now); blank
    /// entries are skipped, but a list with no entry at all is an error rather than "allow
    /// nothing" by accident.
    pub fn parse(var: &str, value: &str) -> Result<Self, ConfigError> {
        if value.trim() == ANY_PROGRAM {
            return Ok(Self::any());
        }
        let invalid = |reason: String| ConfigError::Invalid {
            var: var.to_string(),
            value: value.to_string(),
            reason,
        };
        let mut allow = Self {
            any: false,
            programs: BTreeSet::new(),
            dirs: Vec::new(),
        };
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let path = Path::new(entry);
            if !path.is_absolute() {
                return Err(invalid(format!(
                    "entry {entry:?} is not an absolute path (a program such as /usr/bin/python3 or a directory such as /opt/handlers)"
                )));
            }
            let canonical = path
                .canonicalize()
                .map_err(|e| invalid(format!("entry {entry:?} cannot be resolved: {e}")))?;
            if canonical.is_dir() {
                allow.dirs.push(canonical);
            } else {
                allow.programs.insert(canonical);
            }
        }
        if allow.programs.is_empty() && allow.dirs.is_empty() {
            return Err(invalid(
                "expected a comma-separated list of absolute program paths or directories".into(),
            ));
        }
        Ok(allow)
    }

    /// Every program may run ([`ANY_PROGRAM`]).
    pub fn any() -> Self {
        Self {
            any: true,
            programs: BTreeSet::new(),
            dirs: Vec::new(),
        }
    }

    /// Whether this is [`ANY_PROGRAM`].
    pub fn is_any(&self) -> bool {
        self.any
    }

    /// Reads [`EXEC_ALLOW_VAR`] from the process environment: `Ok(None)` when it is unset
    /// or blank (then no exec kind may be served, see `StdworkerConfig::from_env`).
    pub fn from_env() -> Result<Option<Self>, ConfigError> {
        match std::env::var(EXEC_ALLOW_VAR) {
            Ok(v) if v.trim().is_empty() => Ok(None),
            Ok(v) => Self::parse(EXEC_ALLOW_VAR, &v).map(Some),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError::NotUnicode {
                var: EXEC_ALLOW_VAR.to_string(),
            }),
        }
    }

    /// Whether the program at `canonical` (an already canonicalised path) may run.
    pub fn allows(&self, canonical: &Path) -> bool {
        // `Path::starts_with` compares whole components: /opt/h does not cover /opt/hx.
        self.any
            || self.programs.contains(canonical)
            || self.dirs.iter().any(|d| canonical.starts_with(d))
    }

    /// The canonical entries, for the boot log.
    pub fn entries(&self) -> Vec<&Path> {
        if self.any {
            return vec![Path::new(ANY_PROGRAM)];
        }
        self.programs
            .iter()
            .chain(&self.dirs)
            .map(PathBuf::as_path)
            .collect()
    }
}

/// Where the spawn would find `program`: a value with a `/` is a path (relative to the
/// worker's working directory), a bare name is looked up in `path_var` (the child's `PATH`)
/// the way `execvp` does, skipping entries that are not executable files. The result is
/// absolute but not canonical.
pub fn resolve_program(program: &str, path_var: Option<&str>) -> io::Result<PathBuf> {
    if program.contains('/') {
        return std::path::absolute(program);
    }
    let not_found = || {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{program:?} is not an executable file in PATH"),
        )
    };
    for dir in path_var.ok_or_else(not_found)?.split(':') {
        // An empty PATH entry means the working directory, as for execvp.
        let dir = if dir.is_empty() { "." } else { dir };
        let candidate = Path::new(dir).join(program);
        let executable = std::fs::metadata(&candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if executable {
            return std::path::absolute(candidate);
        }
    }
    Err(not_found())
}

/// Checks a resource's provider-config override before anything runs: it may set only
/// [`OVERRIDABLE`]. `program`, `args`, `env` and `timeout_secs` decide *what runs* on the
/// worker's host and come from the kind's default providerconfig alone; any other key is
/// refused too, so a future exec field cannot become overridable by accident.
pub fn check_override(over: Option<&Value>) -> Result<(), HandlerError> {
    let refused: Vec<&str> = match over {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(o)) => o
            .keys()
            .map(String::as_str)
            .filter(|k| *k != OVERRIDABLE)
            .collect(),
        Some(_) => {
            return Err(HandlerError::terminal(
                "the resource's provider-config override is not an object: an exec kind's override may set only `settings`; nothing was run",
            ));
        }
    };
    if refused.is_empty() {
        return Ok(());
    }
    let fields = refused
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    Err(HandlerError::terminal(format!(
        "the resource's provider-config override sets {fields}: an exec kind's override may set only `settings` (program, args, env and timeout_secs come from the kind's default providerconfig); nothing was run"
    )))
}
