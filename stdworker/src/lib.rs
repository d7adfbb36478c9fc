//! converge-stdworker: a converge worker whose handlers are not compiled into it.
//!
//! Each built-in *provider* turns a kind's provider config into handler behaviour:
//! [`providers::exec`] (one process per task, request JSON on stdin, response JSON on
//! stdout), [`providers::starlark`] (a zip of `.star` files whose `compose` computes a
//! composite's children) and [`providers::cel`] (a kro-style CEL resource graph). Each has
//! its own `STDWORKER_<NAME>_KINDS` variable feeding [`build_registry`].
//!
//! This crate is its own Cargo workspace: `converge-starlark` turns on
//! `serde_json/arbitrary_precision`, which must never reach the control plane's build.

pub mod kinds;
pub mod providers;

use converge_sdk::{ConfigError, KindVersion, Registry};

/// Which kinds each provider serves, as read from the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StdworkerConfig {
    /// Kinds served by the exec provider (`STDWORKER_EXEC_KINDS`).
    pub exec_kinds: Vec<KindVersion>,
    /// Kinds served by the starlark provider (`STDWORKER_STARLARK_KINDS`).
    pub starlark_kinds: Vec<KindVersion>,
    /// Kinds served by the cel provider (`STDWORKER_CEL_KINDS`).
    pub cel_kinds: Vec<KindVersion>,
}

impl StdworkerConfig {
    /// Reads every provider's kind list from the process environment. Serving nothing is an
    /// error (a worker with no kinds cannot subscribe), and so is one (kind, version) given
    /// to two providers.
    pub fn from_env() -> Result<Self, ConfigError> {
        let read = |var| kinds::kinds_from_env(var).map(Option::unwrap_or_default);
        let cfg = Self {
            exec_kinds: read(kinds::EXEC_KINDS_VAR)?,
            starlark_kinds: read(kinds::STARLARK_KINDS_VAR)?,
            cel_kinds: read(kinds::CEL_KINDS_VAR)?,
        };
        if cfg.is_empty() {
            return Err(ConfigError::Missing {
                var: kinds::ALL_KINDS_VARS.join(" or "),
            });
        }
        cfg.check_disjoint()?;
        Ok(cfg)
    }

    /// Whether no provider has a kind to serve.
    pub fn is_empty(&self) -> bool {
        self.exec_kinds.is_empty() && self.starlark_kinds.is_empty() && self.cel_kinds.is_empty()
    }

    /// Fails when one (kind, version) is listed for two providers.
    pub fn check_disjoint(&self) -> Result<(), ConfigError> {
        let lists = [
            (kinds::EXEC_KINDS_VAR, &self.exec_kinds),
            (kinds::STARLARK_KINDS_VAR, &self.starlark_kinds),
            (kinds::CEL_KINDS_VAR, &self.cel_kinds),
        ];
        for (i, (var, list)) in lists.iter().enumerate() {
            for (other_var, other) in &lists[i + 1..] {
                if let Some(kv) = list.iter().find(|kv| other.contains(kv)) {
                    return Err(ConfigError::Invalid {
                        var: (*other_var).to_string(),
                        value: kv.to_string(),
                        reason: format!("{kv} is already served by {var}"),
                    });
                }
            }
        }
        Ok(())
    }
}

/// One SDK provider per configured (kind, version), ready for `converge_sdk::serve`.
pub fn build_registry(cfg: &StdworkerConfig) -> Registry {
    let mut registry = Registry::new();
    for kv in &cfg.exec_kinds {
        registry.register(providers::exec::ExecProvider::new(kv.clone()));
    }
    for kv in &cfg.starlark_kinds {
        registry.register(providers::starlark::StarlarkProvider::new(kv.clone()));
    }
    for kv in &cfg.cel_kinds {
        registry.register(providers::cel::CelProvider::new(kv.clone()));
    }
    registry
}
