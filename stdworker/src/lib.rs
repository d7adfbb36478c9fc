//! converge-stdworker: a converge worker whose handlers are not compiled into it.
//!
//! Each built-in *provider* turns a kind's provider config into handler behaviour. Today
//! there is one, [`providers::exec`]: one process per task, request JSON on stdin, response
//! JSON on stdout. Future sandboxed providers (wasm, starlark, cel) are sibling modules of
//! `exec` under [`providers`], each with its own `STDWORKER_<NAME>_KINDS` variable feeding
//! [`build_registry`].

pub mod kinds;
pub mod providers;

use converge_sdk::{ConfigError, Registry};

/// Which kinds each provider serves, as read from the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StdworkerConfig {
    /// Kinds served by the exec provider (`STDWORKER_EXEC_KINDS`).
    pub exec_kinds: Vec<converge_sdk::KindVersion>,
}

impl StdworkerConfig {
    /// Reads every provider's kind list from the process environment. Serving nothing is an
    /// error: a worker with no kinds cannot subscribe.
    pub fn from_env() -> Result<Self, ConfigError> {
        let exec_kinds = kinds::kinds_from_env(kinds::EXEC_KINDS_VAR)?.unwrap_or_default();
        let cfg = Self { exec_kinds };
        if cfg.is_empty() {
            return Err(ConfigError::Missing {
                var: kinds::EXEC_KINDS_VAR.to_string(),
            });
        }
        Ok(cfg)
    }

    /// Whether no provider has a kind to serve.
    pub fn is_empty(&self) -> bool {
        self.exec_kinds.is_empty()
    }
}

/// One SDK provider per configured (kind, version), ready for `converge_sdk::serve`.
pub fn build_registry(cfg: &StdworkerConfig) -> Registry {
    let mut registry = Registry::new();
    for kv in &cfg.exec_kinds {
        registry.register(providers::exec::ExecProvider::new(kv.clone()));
    }
    registry
}
