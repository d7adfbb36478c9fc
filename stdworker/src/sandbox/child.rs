//! The sandbox child: `stdworker __sandbox <memory-bytes>`, the process in which every
//! starlark and CEL evaluation runs (bundle loads and graph compiles included).
//!
//! It is synchronous and single-threaded (no tokio runtime): it reads one request frame
//! from stdin, evaluates it, writes one reply frame to stdout, and exits at end of input.
//! Before reading anything it bounds itself with resource limits that it cannot raise
//! again, so no engine bug can take more than this process:
//!
//! - `RLIMIT_AS`: its address space at start plus the configured memory bound. A failed
//!   allocation then aborts this process (Rust's allocation-error handler), which
//!   stdworker reports as the `memory` class.
//! - `RLIMIT_CPU`, reset before every request to the CPU time used so far plus the
//!   request's budget: stdworker's wall-clock kill comes first; this limit is what ends an
//!   evaluation whose stdworker died (a lost parent is noticed only between requests, when
//!   stdin ends). `PR_SET_PDEATHSIG` is not used: it fires when the *thread* that spawned
//!   the child exits, and tokio spawns from whichever worker thread is running.
//! - `RLIMIT_CORE` 0 (an aborted 500 MiB process must not write a core file) and
//!   `RLIMIT_FSIZE` 0 (the engines never write files; stdout and stderr are pipes, which the
//!   limit does not cover).
//!
//! Compiled bundles and graphs are cached per content hash, as in-process composers did;
//! a request whose program is not cached and came without it is answered
//! [`Response::Missing`].

use std::{
    ffi::OsString,
    io::{BufReader, BufWriter},
    panic::AssertUnwindSafe,
    process::ExitCode,
};

use base64::Engine;
use converge_cel::{CompileError, Graph};
use converge_starlark::Bundle;
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use super::{
    RunawayClass,
    wire::{self, Job, Program, Reply, Request, Response},
};
use crate::providers::{cel::describe_compile_errors, shared::CompileCache};

/// Exit code when the limits cannot be applied: the child refuses to evaluate unbounded
/// (a host problem, not the program's: stdworker fails the task transiently).
pub(crate) const EXIT_NO_LIMITS: u8 = 3;
/// Exit code after a request that panicked (the reply was sent first).
const EXIT_RETIRED: u8 = 4;
/// Exit code on a broken frame from stdworker.
const EXIT_PROTOCOL: u8 = 5;

/// Runs the child until stdin ends. `args` are the arguments after the hidden subcommand:
/// the memory bound in bytes.
pub fn main(mut args: impl Iterator<Item = OsString>) -> ExitCode {
    let memory = args
        .next()
        .and_then(|a| a.into_string().ok())
        .and_then(|a| a.parse::<u64>().ok());
    let Some(memory) = memory else {
        eprintln!("stdworker sandbox: usage: stdworker __sandbox <memory-bytes>");
        return ExitCode::from(EXIT_NO_LIMITS);
    };
    let baseline = match apply_limits(memory) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("stdworker sandbox: cannot apply resource limits: {e}");
            return ExitCode::from(EXIT_NO_LIMITS);
        }
    };
    let engines = Engines::default();
    let mut input = BufReader::new(std::io::stdin().lock());
    let mut output = BufWriter::new(std::io::stdout().lock());
    loop {
        let frame = match wire::read_frame_sync(&mut input) {
            Ok(Some(f)) => f,
            Ok(None) => return ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("stdworker sandbox: {e}");
                return ExitCode::from(EXIT_PROTOCOL);
            }
        };
        let request: Request = match serde_json::from_slice(&frame) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("stdworker sandbox: malformed request: {e}");
                return ExitCode::from(EXIT_PROTOCOL);
            }
        };
        drop(frame);
        let engine = request.job.engine();
        if let Err(e) = limit_cpu(request.cpu_secs) {
            eprintln!("stdworker sandbox: cannot set the CPU limit: {e}");
            return ExitCode::from(EXIT_NO_LIMITS);
        }
        // A panic inside an engine (starlark's "out of memory" on a failed arena growth,
        // for one) becomes a reply; the process then retires, since an engine that
        // unwound mid-evaluation may have left its caches half-built.
        let (response, panicked) =
            match std::panic::catch_unwind(AssertUnwindSafe(|| engines.handle(request))) {
                Ok(r) => (r, false),
                Err(payload) => (panic_response(engine, payload.as_ref()), true),
            };
        let retire = panicked || vm_size().is_some_and(|now| now > baseline + memory / 2);
        let reply = Reply { response, retire };
        let body = match serde_json::to_vec(&reply) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("stdworker sandbox: cannot encode a reply: {e}");
                return ExitCode::from(EXIT_PROTOCOL);
            }
        };
        if wire::write_frame_sync(&mut output, &body).is_err() {
            // stdworker is gone.
            return ExitCode::SUCCESS;
        }
        if retire {
            return ExitCode::from(EXIT_RETIRED);
        }
    }
}

/// This process's address-space size (`VmSize`), in bytes.
fn vm_size() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmSize:"))?;
    let kib: u64 = line
        .trim_start_matches("VmSize:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Sets the lasting limits; returns the address-space size they were measured from.
///
/// The bound is relative to the size at start so that it means "memory the evaluations may
/// use" whatever the binary maps (a debug build maps several hundred MiB more than a
/// release one). Hard limits are lowered too: nothing in this process can raise them again.
fn apply_limits(memory: u64) -> std::io::Result<u64> {
    let zero = Rlimit {
        current: Some(0),
        maximum: Some(0),
    };
    setrlimit(Resource::Core, zero)?;
    setrlimit(Resource::Fsize, zero)?;
    let baseline = vm_size().ok_or_else(|| std::io::Error::other("cannot read VmSize"))?;
    let want = baseline.saturating_add(memory);
    // Never above an inherited hard limit: raising it would fail with EPERM.
    let cap = getrlimit(Resource::As)
        .maximum
        .map_or(want, |h| h.min(want));
    setrlimit(
        Resource::As,
        Rlimit {
            current: Some(cap),
            maximum: Some(cap),
        },
    )?;
    Ok(baseline)
}

/// Lowers (or raises) the soft `RLIMIT_CPU` to `secs` above the CPU time used so far.
fn limit_cpu(secs: u64) -> std::io::Result<()> {
    let used = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    // Rounded up so the limit is never below what was already used.
    let used = u64::try_from(used.tv_sec).unwrap_or(0) + 1;
    let hard = getrlimit(Resource::Cpu).maximum;
    let soft = used.saturating_add(secs.max(1));
    let soft = hard.map_or(soft, |h| h.min(soft));
    setrlimit(
        Resource::Cpu,
        Rlimit {
            current: Some(soft),
            maximum: hard,
        },
    )?;
    Ok(())
}

/// The reply to a request whose evaluation panicked.
fn panic_response(engine: &str, payload: &(dyn std::any::Any + Send)) -> Response {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string());
    let lower = msg.to_ascii_lowercase();
    let memory = ["out of memory", "capacity overflow", "memory allocation"]
        .iter()
        .any(|m| lower.contains(m));
    let message = if memory {
        format!(
            "the {engine} evaluation ran out of memory (it panicked: {msg}); its sandbox process is replaced"
        )
    } else {
        format!("the {engine} evaluation panicked: {msg}; its sandbox process is replaced")
    };
    Response::Failed {
        class: memory.then_some(RunawayClass::Memory),
        message,
    }
}

/// The compiled programs this child has seen.
#[derive(Default)]
struct Engines {
    bundles: CompileCache<Bundle, converge_starlark::Error>,
    graphs: CompileCache<Graph, Vec<CompileError>>,
}

fn protocol(message: &str) -> Response {
    Response::Failed {
        class: None,
        message: format!("sandbox protocol error: {message}"),
    }
}

fn starlark_failed(e: &converge_starlark::Error) -> Response {
    use converge_starlark::{Error, LimitKind};
    let class = match e {
        Error::Limit(LimitKind::Ticks) => Some(RunawayClass::Cost),
        Error::Limit(LimitKind::Heap) => Some(RunawayClass::Memory),
        Error::Limit(LimitKind::Deadline) => Some(RunawayClass::Deadline),
        _ => None,
    };
    Response::Failed {
        class,
        message: e.to_string(),
    }
}

fn cel_failed(e: &converge_cel::Error) -> Response {
    use converge_cel::{Error, LimitKind};
    let class = match e {
        Error::Limit(LimitKind::Evaluations) => Some(RunawayClass::Cost),
        _ => None,
    };
    Response::Failed {
        class,
        message: format!("cel compose failed: {e}"),
    }
}

fn done<T: serde::Serialize>(out: &T) -> Response {
    match serde_json::value::to_raw_value(out) {
        Ok(v) => Response::Done(Some(v)),
        Err(e) => protocol(&format!("cannot encode the compose output: {e}")),
    }
}

fn parse_spec(raw: &serde_json::value::RawValue) -> Result<serde_json::Value, Response> {
    serde_json::from_str(raw.get()).map_err(|e| protocol(&format!("malformed spec: {e}")))
}

impl Engines {
    fn handle(&self, req: Request) -> Response {
        match req.job {
            Job::Starlark { limits, compose } => {
                let limits = limits.resolve();
                let bundle = match (self.bundles.get(&req.key), req.program) {
                    (Some(b), _) => b,
                    (None, None) => return Response::Missing,
                    (None, Some(Program::Starlark(b64))) => {
                        let bytes = match base64::engine::general_purpose::STANDARD.decode(b64) {
                            Ok(b) => b,
                            Err(e) => return protocol(&format!("bundle is not base64: {e}")),
                        };
                        self.bundles
                            .get_or_compile(req.key, || Bundle::from_zip(&bytes, &limits))
                    }
                    (None, Some(Program::Cel(_))) => {
                        return protocol("a starlark job came with a cel program");
                    }
                };
                let bundle = match bundle {
                    Ok(b) => b,
                    Err(e) => return starlark_failed(&e),
                };
                let Some(input) = compose else {
                    return Response::Done(None);
                };
                let spec = match parse_spec(&input.spec) {
                    Ok(s) => s,
                    Err(r) => return r,
                };
                match bundle.compose_root(&input.root, &spec, &input.config, &limits) {
                    Ok(out) => done(&out),
                    Err(e) => starlark_failed(&e),
                }
            }
            Job::Cel { compose } => {
                let graph = match (self.graphs.get(&req.key), req.program) {
                    (Some(g), _) => g,
                    (None, None) => return Response::Missing,
                    (None, Some(Program::Cel(spec))) => self.graphs.get_or_compile(req.key, || {
                        Graph::compile(&spec, converge_cel::Limits::default())
                    }),
                    (None, Some(Program::Starlark(_))) => {
                        return protocol("a cel job came with a starlark program");
                    }
                };
                let graph = match graph {
                    Ok(g) => g,
                    Err(e) => {
                        return Response::Failed {
                            class: None,
                            message: describe_compile_errors(&e),
                        };
                    }
                };
                let Some(input) = compose else {
                    return Response::Done(None);
                };
                let spec = match parse_spec(&input.spec) {
                    Ok(s) => s,
                    Err(r) => return r,
                };
                match graph.compose(&input.root_name, &spec) {
                    Ok(out) => done(&out),
                    Err(e) => cel_failed(&e),
                }
            }
        }
    }
}
