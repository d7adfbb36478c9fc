//! The exec provider: every task runs one fresh process named by the kind's effective
//! provider config, with the request JSON on stdin and the response JSON on stdout.
//!
//! Exit 0 is success (stdout parsed as the response; empty stdout = empty outcome, invalid
//! JSON = terminal), exit 2 is a terminal failure, any other exit or a signal is transient.
//! A run stopped by stdworker (cancel, deadline, timeout) is transient whatever its exit
//! code; stdout over its cap is terminal. Failure messages carry the exit status and the
//! stderr tail. The config is read from each task, so editing the providerconfig changes
//! the next run without a restart.
//!
//! What runs is decided by the kind's default providerconfig alone: a resource's override
//! that sets anything but `settings` fails the task terminally before anything starts, and
//! with `STDWORKER_EXEC_ALLOW` set so does a program outside it ([`allow`]).

pub mod allow;
pub mod config;
pub mod process;
pub mod request;
pub mod response;

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Instant,
};

use converge_sdk::{
    HandlerError, KindVersion, Outcome, Provider, ProviderConfig, ReactionRequest, Stage,
};
use tracing::{debug, info, warn};

pub use self::{
    allow::{ANY_PROGRAM, EXEC_ALLOW_VAR, ExecAllow, check_override, resolve_program},
    config::ExecConfig,
    process::{CommandSpec, Exit, Limits, RunReport, Stop, run_process},
    request::build_request,
    response::parse_response,
};

/// The exit code an exec handler uses for a terminal failure.
pub const EXIT_TERMINAL: i32 = 2;

/// `PATH` given to handlers when the worker itself has none.
const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Serves one (kind, version) by running the program its provider config names.
#[derive(Debug)]
pub struct ExecProvider {
    kv: KindVersion,
    ready: AtomicBool,
    limits: Limits,
    allow: Option<Arc<ExecAllow>>,
}

impl ExecProvider {
    /// A provider for `kv` with the default limits. Unready until a default config naming
    /// a program arrives.
    pub fn new(kv: KindVersion) -> Self {
        Self::with_limits(kv, Limits::default())
    }

    /// A provider with explicit limits (tests use small caps).
    pub fn with_limits(kv: KindVersion, limits: Limits) -> Self {
        Self {
            kv,
            ready: AtomicBool::new(false),
            limits,
            allow: None,
        }
    }

    /// Restricts the programs this kind may start (`STDWORKER_EXEC_ALLOW`); `None` allows
    /// any.
    pub fn with_allow(mut self, allow: Option<Arc<ExecAllow>>) -> Self {
        self.allow = allow;
        self
    }
}

impl Provider for ExecProvider {
    fn kind(&self) -> KindVersion {
        self.kv.clone()
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        execute(&req, &self.limits, self.allow.as_deref()).await
    }

    fn on_config(&self, cfg: ProviderConfig) {
        let ready = match cfg.spec.as_ref().map(ExecConfig::from_value) {
            None => false,
            Some(Ok(c)) => c.is_ready(),
            Some(Err(e)) => {
                warn!(kind = %self.kv, error = %e, "default exec config is unusable; kind stays unready");
                false
            }
        };
        let was = self.ready.swap(ready, Ordering::Relaxed);
        if was != ready {
            info!(kind = %self.kv, ready, "exec readiness changed by a config push");
        }
    }

    fn ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

/// The child's whole environment: the worker's `PATH` and `HOME`, then the config's `env`
/// (which wins). Nothing else is inherited, so the worker's own secrets never reach a
/// handler.
pub fn child_env(config_env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    env.insert(
        "PATH".to_string(),
        std::env::var("PATH").unwrap_or_else(|_| FALLBACK_PATH.to_string()),
    );
    if let Ok(home) = std::env::var("HOME") {
        env.insert("HOME".to_string(), home);
    }
    env.extend(config_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// Runs one task through its program and maps the result.
///
/// Config problems (no program, a malformed config, a program that cannot start) are
/// transient: they are fixed by editing the providerconfig, which a terminal failure would
/// not notice (terminal failures wait for a *spec* change). Refusals are terminal and run
/// nothing: an override setting more than `settings`, and a program outside `allow`.
pub async fn execute(
    req: &ReactionRequest,
    limits: &Limits,
    allow: Option<&ExecAllow>,
) -> Result<Outcome, HandlerError> {
    check_override(req.config_override.as_ref())?;
    let cfg = ExecConfig::from_value(&req.effective_config()).map_err(HandlerError::transient)?;
    let Some(program) = cfg.program() else {
        return Err(HandlerError::transient(format!(
            "no program configured for {}@v{}: set `program` in its providerconfig",
            req.kind, req.kind_version
        )));
    };
    let env = child_env(&cfg.env);
    let cmd = match allow {
        None => CommandSpec {
            program: program.to_string(),
            arg0: None,
            args: cfg.args.clone(),
            env,
        },
        Some(allow) => allowed_command(program, &cfg, env, allow)?,
    };
    // The program gets the whole live subtree, as it always has: read here, page by page,
    // when the kind's rollup takes the summary form.
    let descendants = match req.stage {
        Stage::Rollup => req.read_descendants().await?,
        _ => Vec::new(),
    };
    let input = build_request(
        req,
        cfg.settings.as_ref(),
        req.effective_bundle(),
        &descendants,
    );
    let input = serde_json::to_vec(&input)
        .map_err(|e| HandlerError::terminal(format!("cannot encode the exec request: {e}")))?;
    let started = Instant::now();
    let report = run_process(
        &cmd,
        input,
        &req.cancel,
        req.deadline,
        cfg.timeout(),
        limits,
    )
    .await
    .map_err(|e| HandlerError::transient(format!("cannot start exec handler {program:?}: {e}")))?;
    debug!(
        pid = report.pid,
        exit = ?report.exit,
        stop = ?report.stop,
        stdout_bytes = report.stdout.len(),
        elapsed = ?started.elapsed(),
        "exec handler finished"
    );
    outcome_of(&report, limits)
}

/// The command for `program` when an allowlist applies: resolved as the spawn would
/// (through the child's `PATH`), canonicalised, checked, and then run by that canonical
/// path (under its configured name as `argv[0]`), so what was checked is what starts even
/// if a symlink on the way is swapped afterwards.
fn allowed_command(
    program: &str,
    cfg: &ExecConfig,
    env: BTreeMap<String, String>,
    allow: &ExecAllow,
) -> Result<CommandSpec, HandlerError> {
    let cannot_start = |e: std::io::Error| {
        HandlerError::transient(format!("cannot start exec handler {program:?}: {e}"))
    };
    let canonical = resolve_program(program, env.get("PATH").map(String::as_str))
        .and_then(|p| p.canonicalize())
        .map_err(cannot_start)?;
    if !allow.allows(&canonical) {
        return Err(HandlerError::terminal(format!(
            "exec program {program:?} ({}) is outside {EXEC_ALLOW_VAR}; nothing was run",
            canonical.display()
        )));
    }
    let Some(canonical) = canonical.to_str() else {
        return Err(HandlerError::terminal(format!(
            "exec program {program:?} resolves to a path that is not UTF-8 ({}); nothing was run",
            canonical.display()
        )));
    };
    Ok(CommandSpec {
        program: canonical.to_string(),
        arg0: Some(program.to_string()),
        args: cfg.args.clone(),
        env,
    })
}

/// `; stderr: <tail>` (marked as truncated when earlier bytes were dropped), or nothing.
fn stderr_suffix(r: &RunReport) -> String {
    let tail = r.stderr_tail.trim_end();
    if tail.is_empty() {
        String::new()
    } else if r.stderr_dropped > 0 {
        format!("; stderr (last {} bytes): …{tail}", tail.len())
    } else {
        format!("; stderr: {tail}")
    }
}

fn describe_exit(e: Exit) -> String {
    match e {
        Exit::Code(c) => format!("exit code {c}"),
        Exit::Signal(s) => format!("killed by signal {s}"),
    }
}

/// Maps a finished run to the task's result (the exit-code contract of the module docs).
pub fn outcome_of(r: &RunReport, limits: &Limits) -> Result<Outcome, HandlerError> {
    let exit = describe_exit(r.exit);
    let stderr = stderr_suffix(r);
    match r.stop {
        Some(Stop::OutputTooLarge) => {
            return Err(HandlerError::terminal(format!(
                "exec handler output too large: stdout exceeded {} bytes; its process group was killed ({exit}){stderr}",
                limits.stdout_max
            )));
        }
        Some(Stop::Cancelled) => {
            return Err(HandlerError::transient(format!(
                "exec handler cancelled; its process group was killed ({exit}){stderr}"
            )));
        }
        Some(Stop::Deadline) => {
            return Err(HandlerError::transient(format!(
                "task deadline exceeded; the exec handler's process group was killed ({exit}){stderr}"
            )));
        }
        Some(Stop::TimedOut(d)) => {
            return Err(HandlerError::transient(format!(
                "exec handler timed out after {d:?} (timeout_secs); its process group was killed ({exit}){stderr}"
            )));
        }
        None => {}
    }
    match r.exit {
        Exit::Code(0) => parse_response(&r.stdout).map_err(|e| {
            HandlerError::terminal(format!(
                "exec handler exited 0 with an unusable response: {e}{stderr}"
            ))
        }),
        Exit::Code(EXIT_TERMINAL) => Err(HandlerError::terminal(format!(
            "exec handler failed terminally ({exit}){stderr}"
        ))),
        _ => Err(HandlerError::transient(format!(
            "exec handler failed ({exit}){stderr}"
        ))),
    }
}
