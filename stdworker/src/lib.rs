//! converge-stdworker: a converge worker whose handlers are not compiled into it.
//!
//! Each built-in *provider* turns a kind's provider config into handler behaviour:
//! [`providers::exec`] (one process per task, request JSON on stdin, response JSON on
//! stdout), [`providers::starlark`] (a zip of `.star` files whose `compose` computes a
//! composite's children), [`providers::cel`] (a kro-style CEL resource graph) and
//! [`providers::wasm`] (a sandboxed WASM component per task). Each has its own
//! `STDWORKER_<NAME>_KINDS` variable feeding [`build_registry`]; the sandboxed ones can be
//! journaled ([`journal`], `STDWORKER_TASK_JOURNAL`). Starlark and CEL evaluate in a pool
//! of sandbox child processes ([`sandbox`]): `stdworker __sandbox` is the child.
//!
//! This crate is its own Cargo workspace: `converge-starlark` turns on
//! `serde_json/arbitrary_precision`, which must never reach the control plane's build.

pub mod journal;
pub mod kinds;
pub mod providers;
pub mod sandbox;

use std::sync::Arc;

use converge_sdk::{ConfigError, KindVersion, Registry};

use crate::{
    providers::exec::ExecAllow,
    sandbox::{SandboxConfig, SandboxPool},
};

/// Which kinds each provider serves, as read from the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StdworkerConfig {
    /// Kinds served by the exec provider (`STDWORKER_EXEC_KINDS`).
    pub exec_kinds: Vec<KindVersion>,
    /// Kinds served by the starlark provider (`STDWORKER_STARLARK_KINDS`).
    pub starlark_kinds: Vec<KindVersion>,
    /// Kinds served by the cel provider (`STDWORKER_CEL_KINDS`).
    pub cel_kinds: Vec<KindVersion>,
    /// Kinds served by the wasm provider (`STDWORKER_WASM_KINDS`).
    pub wasm_kinds: Vec<KindVersion>,
    /// The programs exec kinds may start (`STDWORKER_EXEC_ALLOW`, `*` for any); `None`
    /// (unset) only when no exec kind is served.
    pub exec_allow: Option<ExecAllow>,
    /// The composers' sandbox pool (`STDWORKER_SANDBOX_*`).
    pub sandbox: SandboxConfig,
}

impl StdworkerConfig {
    /// Reads every provider's kind list, the exec allowlist and the sandbox settings from
    /// the process environment. Serving nothing is an error (a worker with no kinds cannot
    /// subscribe), and so is one (kind, version) given to two providers.
    pub fn from_env() -> Result<Self, ConfigError> {
        let read = |var| kinds::kinds_from_env(var).map(Option::unwrap_or_default);
        let cfg = Self {
            exec_kinds: read(kinds::EXEC_KINDS_VAR)?,
            starlark_kinds: read(kinds::STARLARK_KINDS_VAR)?,
            cel_kinds: read(kinds::CEL_KINDS_VAR)?,
            wasm_kinds: read(kinds::WASM_KINDS_VAR)?,
            exec_allow: ExecAllow::from_env()?,
            sandbox: SandboxConfig::from_env()?,
        };
        if cfg.is_empty() {
            return Err(ConfigError::Missing {
                var: kinds::ALL_KINDS_VARS.join(" or "),
            });
        }
        cfg.check_disjoint()?;
        cfg.check_exec_allow()?;
        Ok(cfg)
    }

    /// Refuses exec kinds without `STDWORKER_EXEC_ALLOW`: unset, any providerconfig author
    /// would run any program on this host. `*` says "any program" on purpose.
    pub fn check_exec_allow(&self) -> Result<(), ConfigError> {
        if self.exec_kinds.is_empty() || self.exec_allow.is_some() {
            return Ok(());
        }
        Err(ConfigError::Conflict {
            var: providers::exec::EXEC_ALLOW_VAR.to_string(),
            message: format!(
                "{allow} is required to serve exec kinds ({kinds} is set): list the absolute \
                 programs or directories they may run (e.g. {allow}=/usr/bin/python3,/opt/handlers), \
                 or set {allow}={any} to let them run any program on purpose (a laptop, a demo)",
                allow = providers::exec::EXEC_ALLOW_VAR,
                kinds = kinds::EXEC_KINDS_VAR,
                any = providers::exec::ANY_PROGRAM,
            ),
        })
    }

    /// Whether no provider has a kind to serve.
    pub fn is_empty(&self) -> bool {
        self.exec_kinds.is_empty()
            && self.starlark_kinds.is_empty()
            && self.cel_kinds.is_empty()
            && self.wasm_kinds.is_empty()
    }

    /// Fails when one (kind, version) is listed for two providers.
    pub fn check_disjoint(&self) -> Result<(), ConfigError> {
        let lists = [
            (kinds::EXEC_KINDS_VAR, &self.exec_kinds),
            (kinds::STARLARK_KINDS_VAR, &self.starlark_kinds),
            (kinds::CEL_KINDS_VAR, &self.cel_kinds),
            (kinds::WASM_KINDS_VAR, &self.wasm_kinds),
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
///
/// Fails when the task journal cannot be opened or the wasm host cannot be built (both
/// read from the environment: [`journal::JOURNAL_VAR`], [`providers::wasm::CACHE_DIR_VAR`]).
pub fn build_registry(cfg: &StdworkerConfig) -> anyhow::Result<Registry> {
    let journal = journal::Journal::from_env()?;
    let mut registry = Registry::new();
    // The sandboxed providers run code that cannot write files: the worker journals for them.
    fn add<P: converge_sdk::Provider>(
        registry: &mut Registry,
        journal: &Option<journal::Journal>,
        form: &'static str,
        provider: P,
    ) {
        match journal {
            Some(j) => registry.register(journal::Journaled::new(provider, form, j.clone())),
            None => registry.register(provider),
        }
    }
    let exec_allow = cfg.exec_allow.clone().map(Arc::new);
    for kv in &cfg.exec_kinds {
        let p = providers::exec::ExecProvider::new(kv.clone()).with_allow(exec_allow.clone());
        registry.register(p);
    }
    // One pool for both composers: a child serves whichever engine asks next.
    let pool = SandboxPool::new(cfg.sandbox.clone());
    for kv in &cfg.starlark_kinds {
        let p = providers::starlark::StarlarkProvider::new(kv.clone(), pool.clone());
        add(&mut registry, &journal, "starlark", p);
    }
    for kv in &cfg.cel_kinds {
        let p = providers::cel::CelProvider::new(kv.clone(), pool.clone());
        add(&mut registry, &journal, "cel", p);
    }
    if !cfg.wasm_kinds.is_empty() {
        let host = providers::wasm::host_from_env()
            .map_err(|e| anyhow::anyhow!("cannot start the wasm host: {e:#}"))?;
        for kv in &cfg.wasm_kinds {
            let p = providers::wasm::WasmProvider::new(kv.clone(), host.clone());
            add(&mut registry, &journal, "wasm", p);
        }
    }
    Ok(registry)
}
