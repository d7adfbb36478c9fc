//! `stdworker`: serves the kinds named in its environment with the built-in providers until
//! SIGINT or SIGTERM, then drains.
//!
//! Environment: `STDWORKER_EXEC_KINDS`, `STDWORKER_STARLARK_KINDS`, `STDWORKER_CEL_KINDS`,
//! `STDWORKER_WASM_KINDS` (each comma-separated `kind` or `kind:version`; at least one is
//! required), `STDWORKER_EXEC_ALLOW` (the absolute program paths and directories exec kinds
//! may run, or `*` for any; required with `STDWORKER_EXEC_KINDS`), `STDWORKER_TASK_JOURNAL` (a JSON-lines file of the sandboxed
//! providers' tasks), `STDWORKER_WASM_CACHE_DIR` (compiled components; default
//! `~/.cache/converge/wasm`) plus the SDK's variables (`BROKER_ADDR`, `WORKER_TOKEN` or
//! `WORKER_TOKEN_FILE`, `BROKER_CA_FILE`, `WORKER_CERT_FILE` + `WORKER_KEY_FILE`,
//! `WORKER_MAX_PARALLEL`, `WORKER_DRAIN_TIMEOUT`, `WORKER_KINDS`, `WORKER_NAME`, `LOG_LEVEL`,
//! `LOG_FORMAT`). A malformed value stops the boot with a message naming the variable and
//! exit code 2. `STDWORKER_SANDBOX_PROCS`, `STDWORKER_SANDBOX_MEMORY_MIB` and
//! `STDWORKER_SANDBOX_TIMEOUT` bound the composers' sandbox.
//!
//! `stdworker precompile COMPONENT.wasm...` compiles WASM components into the compile cache
//! (`STDWORKER_WASM_CACHE_DIR`) and exits, so a worker that later gets one as a bundle is
//! ready at once instead of after its compile (about two minutes for a 12 MB JavaScript
//! component on a busy 2-core machine): a step for an image build or a test setup.
//!
//! `stdworker __sandbox <memory-bytes>` (hidden, started by stdworker itself) is a sandbox
//! child: it evaluates starlark and CEL requests from stdin under its own resource limits
//! and never starts a runtime.

use std::process::ExitCode;

use converge_sdk::WorkerConfig;
use converge_stdworker::{StdworkerConfig, build_registry, sandbox};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(a) if a == sandbox::CHILD_ARG => return sandbox::child::main(args),
        Some(a) if a == "precompile" => return precompile(args),
        _ => {}
    }
    // Only the worker gets a runtime: the child is single-threaded and synchronous.
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(serve()),
        Err(e) => {
            eprintln!("stdworker: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `stdworker precompile FILE...`: each component compiled into the disk cache (or found
/// there), one line per file; exit 1 if any does not load, 2 without a file or a cache dir.
fn precompile(files: impl Iterator<Item = std::ffi::OsString>) -> ExitCode {
    let files: Vec<_> = files.collect();
    if files.is_empty() {
        eprintln!("usage: stdworker precompile COMPONENT.wasm...");
        return ExitCode::from(2);
    }
    let host = match converge_stdworker::providers::wasm::host_from_env() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("stdworker precompile: cannot start the wasm host: {e:#}");
            return ExitCode::from(2);
        }
    };
    let mut failed = false;
    for file in &files {
        let shown = std::path::Path::new(file).display();
        let started = std::time::Instant::now();
        let result = std::fs::read(file)
            .map_err(|e| format!("cannot read it: {e}"))
            .and_then(|bytes| {
                let loaded = host.load(&bytes).map_err(|e| e.to_string())?;
                Ok((loaded, host.cache_path(&bytes)))
            });
        match result {
            Ok((loaded, Some(path))) => println!(
                "stdworker precompile: {shown}: sha256 {} ({} bytes) in {:.1} s, cached at {}",
                loaded.sha256(),
                loaded.size(),
                started.elapsed().as_secs_f64(),
                path.display()
            ),
            Ok((_, None)) => {
                eprintln!(
                    "stdworker precompile: {shown}: compiled, but the disk cache is off ({} is empty)",
                    converge_stdworker::providers::wasm::CACHE_DIR_VAR
                );
                return ExitCode::from(2);
            }
            Err(e) => {
                eprintln!("stdworker precompile: {shown}: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

async fn serve() -> ExitCode {
    if let Err(e) = converge_sdk::init_logging() {
        eprintln!("stdworker: {e}");
        return ExitCode::from(2);
    }
    // Both configs are read before any connection so a typo fails the boot at once.
    let parsed = StdworkerConfig::from_env().and_then(|std| Ok((std, WorkerConfig::from_env()?)));
    let (std_cfg, worker_cfg) = match parsed {
        Ok(v) => v,
        Err(e) => {
            eprintln!("stdworker: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    tracing::info!(
        exec_kinds = ?std_cfg.exec_kinds,
        starlark_kinds = ?std_cfg.starlark_kinds,
        cel_kinds = ?std_cfg.cel_kinds,
        wasm_kinds = ?std_cfg.wasm_kinds,
        sandbox = ?std_cfg.sandbox,
        "stdworker starting"
    );
    match &std_cfg.exec_allow {
        // Said at every start: in production this is "any providerconfig author runs any
        // program on this host".
        Some(allow) if allow.is_any() => tracing::warn!(
            "STDWORKER_EXEC_ALLOW=*: exec kinds may run any program their default providerconfig names; list the programs in production"
        ),
        Some(allow) => {
            tracing::info!(allow = ?allow.entries(), "exec programs restricted by STDWORKER_EXEC_ALLOW")
        }
        None => {}
    }
    let registry = match build_registry(&std_cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("stdworker: {e:#}");
            return ExitCode::from(2);
        }
    };
    match converge_sdk::run_worker(worker_cfg, registry, converge_sdk::shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // WorkerError's Display hides the ConfigError detail in its source.
            let detail = std::error::Error::source(&e)
                .map(|s| format!(": {s}"))
                .unwrap_or_default();
            eprintln!("stdworker: {e}{detail}");
            ExitCode::from(2)
        }
    }
}
