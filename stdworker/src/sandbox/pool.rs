//! The pool of sandbox children: leases one idle child per evaluation (starting one when
//! none is idle and the pool is below its size), exchanges frames with it under a
//! wall-clock deadline, and kills or forgets it when that fails.
//!
//! Guarantees:
//! - A child serves one request at a time, and a child whose request did not end with a
//!   complete reply (deadline, death, cancelled or dropped future) is killed and never
//!   handed out again; the next evaluation starts a fresh one.
//! - At most `procs` children exist; an evaluation waits for a free one without a budget
//!   of its own (its task's deadline and cancellation bound the wait), and its wall-clock
//!   budget starts once it has a child, so time spent queued behind a runaway evaluation
//!   is never charged to an innocent one.
//! - Nothing an evaluation does touches stdworker's memory beyond one reply frame
//!   ([`wire::MAX_FRAME_BYTES`]).
//!
//! Assumptions: children are reaped by tokio (`kill_on_drop`), which needs the runtime
//! that spawned them to keep running; a child is stdworker's own binary, so a reply is
//! trusted to be well-formed JSON of [`wire::Reply`]'s shape (anything else is a protocol
//! error and the child is dropped).

use std::{
    collections::BTreeSet,
    fmt,
    os::unix::process::ExitStatusExt,
    process::{ExitStatus, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use rustix::process::Signal;
use serde_json::value::RawValue;
use tokio::{
    io::AsyncReadExt,
    process::{Child, ChildStdin, ChildStdout, Command},
    sync::{OwnedSemaphorePermit, Semaphore},
    task::JoinHandle,
    time::Instant,
};
use tracing::{debug, warn};

use super::{
    CHILD_ARG, RunawayClass, SandboxConfig, SandboxError,
    wire::{self, FrameError, Job, Program, Reply, Request, Response},
};
use crate::providers::{exec::process::Tail, shared::ContentHash};

/// Below this much time there is no point starting an evaluation.
const MIN_BUDGET: Duration = Duration::from_millis(50);
/// How much of a dead child's stderr is kept for the failure message.
const STDERR_TAIL: usize = 2048;
/// How long a child that closed its stdout may take to exit (and its stderr to drain).
const REAP_GRACE: Duration = Duration::from_secs(2);
/// The longest stderr line quoted in a failure message.
const QUOTE_MAX: usize = 240;

/// A cheap, cloneable handle to the pool of sandbox children.
#[derive(Clone)]
pub struct SandboxPool {
    inner: Arc<Inner>,
}

struct Inner {
    config: SandboxConfig,
    slots: Arc<Semaphore>,
    idle: Mutex<Vec<ChildProc>>,
    /// Every child not yet given up (idle or leased), by pid.
    live: Arc<Mutex<BTreeSet<u32>>>,
    spawned: AtomicU64,
    killed: AtomicU64,
    died: AtomicU64,
    programs_sent: AtomicU64,
}

/// Counters of a pool's life, for logs and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Children started.
    pub spawned: u64,
    /// Children killed on their deadline.
    pub killed: u64,
    /// Children that died during an evaluation (memory bound, crash) or while idle.
    pub died: u64,
    /// Requests that carried their program because the child had not compiled it.
    pub programs_sent: u64,
    /// Children idle right now.
    pub idle: usize,
}

impl fmt::Debug for SandboxPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxPool")
            .field("config", &self.inner.config)
            .field("stats", &self.stats())
            .finish()
    }
}

impl SandboxPool {
    /// A pool running children as `config` says. No child starts until the first
    /// evaluation.
    pub fn new(config: SandboxConfig) -> Self {
        let procs = config.procs.max(1);
        Self {
            inner: Arc::new(Inner {
                slots: Arc::new(Semaphore::new(procs)),
                config,
                idle: Mutex::new(Vec::new()),
                live: Arc::default(),
                spawned: AtomicU64::new(0),
                killed: AtomicU64::new(0),
                died: AtomicU64::new(0),
                programs_sent: AtomicU64::new(0),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SandboxConfig {
        &self.inner.config
    }

    /// The counters so far.
    pub fn stats(&self) -> PoolStats {
        let i = &self.inner;
        PoolStats {
            spawned: i.spawned.load(Ordering::Relaxed),
            killed: i.killed.load(Ordering::Relaxed),
            died: i.died.load(Ordering::Relaxed),
            programs_sent: i.programs_sent.load(Ordering::Relaxed),
            idle: i.idle.lock().expect("idle lock").len(),
        }
    }

    /// The process ids of the idle children (tests watch one die).
    pub fn idle_pids(&self) -> Vec<u32> {
        let idle = self.inner.idle.lock().expect("idle lock");
        idle.iter().map(|p| p.pid).collect()
    }

    /// The process ids of every child in use or idle; a child leaves this list when the
    /// pool gives it up (killed, dead or retired), possibly just before it is reaped.
    pub fn pids(&self) -> Vec<u32> {
        let live = self.inner.live.lock().expect("live lock");
        live.iter().copied().collect()
    }

    /// The wall-clock budget of an evaluation starting now for a task due at
    /// `task_deadline`: the configured timeout, or less when the task's deadline is nearer.
    /// A tenth of the time left (at most 1 s) is kept back so that the sandbox reports a
    /// runaway (terminal, with its class) before the SDK's own deadline answers the task
    /// with a transient "deadline exceeded" that would be retried.
    pub fn budget(&self, task_deadline: Option<Instant>) -> Duration {
        let timeout = self.inner.config.timeout;
        let Some(due) = task_deadline else {
            return timeout;
        };
        let left = due.saturating_duration_since(Instant::now());
        let margin = (left / 10).min(Duration::from_secs(1));
        timeout.min(left - margin)
    }

    /// Runs `job` on the program named `key` in a sandbox child; `program` is called (once)
    /// only if the child has not compiled that program yet.
    ///
    /// Returns the engine's output as JSON text (`None` for a load/compile-only job). Waits
    /// for a free child first; dropping the future at any point kills the child it was
    /// using.
    pub async fn evaluate(
        &self,
        key: ContentHash,
        job: Job,
        program: impl FnOnce() -> Program,
        task_deadline: Option<Instant>,
    ) -> Result<Option<Box<RawValue>>, SandboxError> {
        let engine = job.engine();
        let mut lease = self.lease(engine).await?;
        let budget = self.budget(task_deadline);
        if budget < MIN_BUDGET {
            return Err(SandboxError::NoTime { left: budget });
        }
        let deadline = Instant::now() + budget;
        let mut req = Request {
            // Rounded up, plus slack: the wall clock must win whenever stdworker is alive.
            cpu_secs: budget.as_secs() + 2,
            key,
            program: None,
            job,
        };
        let mut response = lease.call(&req, deadline, budget).await?;
        if matches!(response, Response::Missing) {
            req.program = Some(program());
            self.inner.programs_sent.fetch_add(1, Ordering::Relaxed);
            response = lease.call(&req, deadline, budget).await?;
        }
        match response {
            Response::Done(out) => Ok(out),
            Response::Failed { class, message } => Err(SandboxError::Engine { class, message }),
            Response::Missing => Err(SandboxError::Protocol {
                engine,
                detail: "the child asked again for the program it was just sent".into(),
            }),
        }
    }

    /// Takes a free slot and an idle child (or starts one).
    async fn lease(&self, engine: &'static str) -> Result<Lease, SandboxError> {
        let permit = Arc::clone(&self.inner.slots)
            .acquire_owned()
            .await
            .expect("the pool's semaphore is never closed");
        let proc = loop {
            let idle = self.inner.idle.lock().expect("idle lock").pop();
            let Some(mut p) = idle else {
                break self.spawn().map_err(|e| SandboxError::Unavailable {
                    engine,
                    detail: format!(
                        "cannot start {} {CHILD_ARG}: {e}",
                        self.inner.config.program.display()
                    ),
                })?;
            };
            if !p.exited() {
                break p;
            }
            // A child that died while idle (killed from outside) is forgotten; its `Child`
            // is reaped on drop.
            self.inner.died.fetch_add(1, Ordering::Relaxed);
            warn!(
                pid = p.pid,
                "an idle sandbox process had exited; replacing it"
            );
        };
        Ok(Lease {
            inner: Arc::clone(&self.inner),
            proc: Some(proc),
            healthy: true,
            engine,
            _permit: permit,
        })
    }

    fn spawn(&self) -> std::io::Result<ChildProc> {
        let cfg = &self.inner.config;
        let mut child = Command::new(&cfg.program)
            .arg(CHILD_ARG)
            .arg(cfg.memory_bytes.to_string())
            // The child needs nothing from stdworker's environment (tokens included).
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Out of stdworker's process group: a Ctrl-C meant for stdworker must not kill
            // the evaluations it is draining.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().unwrap_or(0);
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(std::io::Error::other("the child's pipes are missing"));
        };
        let tail = Arc::new(Mutex::new(Tail::new(STDERR_TAIL)));
        let stderr_task = tokio::spawn({
            let tail = Arc::clone(&tail);
            async move {
                let mut chunk = [0u8; 1024];
                while let Ok(n @ 1..) = stderr.read(&mut chunk).await {
                    tail.lock().expect("tail lock").push(&chunk[..n]);
                }
            }
        });
        self.inner.spawned.fetch_add(1, Ordering::Relaxed);
        self.inner.live.lock().expect("live lock").insert(pid);
        debug!(pid, "sandbox process started");
        Ok(ChildProc {
            child,
            pid,
            stdin,
            stdout,
            tail,
            stderr_task,
            live: Arc::clone(&self.inner.live),
        })
    }
}

/// One running child and its pipes.
struct ChildProc {
    child: Child,
    pid: u32,
    stdin: ChildStdin,
    stdout: ChildStdout,
    tail: Arc<Mutex<Tail>>,
    stderr_task: JoinHandle<()>,
    live: Arc<Mutex<BTreeSet<u32>>>,
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        self.live.lock().expect("live lock").remove(&self.pid);
        // `kill_on_drop` SIGKILLs a child still running; tokio reaps it.
        self.stderr_task.abort();
    }
}

impl ChildProc {
    fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILLs the child and waits (bounded) until it is reaped.
    async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(REAP_GRACE, self.child.wait()).await;
    }

    /// After its stdout ended: how the child ended and the end of its stderr.
    async fn death(mut self) -> (Option<ExitStatus>, String) {
        let status = match tokio::time::timeout(REAP_GRACE, self.child.wait()).await {
            Ok(Ok(s)) => Some(s),
            // Closed its output but kept running: it is of no further use.
            _ => {
                let _ = self.child.start_kill();
                None
            }
        };
        let _ = tokio::time::timeout(REAP_GRACE, &mut self.stderr_task).await;
        let tail = std::mem::replace(&mut *self.tail.lock().expect("tail lock"), Tail::new(0));
        (status, tail.finish().0)
    }
}

/// One child lent to one evaluation, with its pool slot.
struct Lease {
    inner: Arc<Inner>,
    proc: Option<ChildProc>,
    /// False from the moment a request is written until its whole reply was read: a lease
    /// dropped in between holds a child in an unknown state.
    healthy: bool,
    engine: &'static str,
    // Dropped after `Drop::drop` has put the child back: the slot frees last.
    _permit: OwnedSemaphorePermit,
}

impl Lease {
    /// Sends one request and reads its reply before `deadline`.
    async fn call(
        &mut self,
        req: &Request,
        deadline: Instant,
        budget: Duration,
    ) -> Result<Response, SandboxError> {
        let engine = self.engine;
        let body = serde_json::to_vec(req).map_err(|e| SandboxError::Protocol {
            engine,
            detail: format!("cannot encode the request: {e}"),
        })?;
        let proc = self
            .proc
            .as_mut()
            .expect("a lease holds its child until it fails");
        let pid = proc.pid;
        self.healthy = false;
        let exchange = async {
            wire::write_frame(&mut proc.stdin, &body)
                .await
                .map_err(|e| (true, FrameError::Io(e)))?;
            wire::read_frame(&mut proc.stdout)
                .await
                .map_err(|e| (false, e))
        };
        let outcome = tokio::time::timeout_at(deadline, exchange).await;
        let frame = match outcome {
            Ok(Ok(frame)) => frame,
            Err(_elapsed) => {
                let proc = self.proc.take().expect("checked above");
                proc.kill().await;
                self.inner.killed.fetch_add(1, Ordering::Relaxed);
                warn!(
                    pid,
                    engine,
                    ?budget,
                    "sandbox evaluation ran past its deadline; process killed"
                );
                return Err(SandboxError::Runaway {
                    class: RunawayClass::Deadline,
                    detail: format!(
                        "the {engine} evaluation did not finish within its wall-clock budget of {}; its sandbox process was killed",
                        human(budget)
                    ),
                });
            }
            Ok(Err((_, FrameError::TooLarge(n)))) => {
                self.proc.take().expect("checked above").kill().await;
                return Err(SandboxError::Protocol {
                    engine,
                    detail: format!("a reply of {n} bytes is above the frame cap"),
                });
            }
            Ok(Err((writing, FrameError::Io(e)))) => {
                let proc = self.proc.take().expect("checked above");
                let (status, stderr) = proc.death().await;
                self.inner.died.fetch_add(1, Ordering::Relaxed);
                warn!(pid, engine, ?status, %stderr, error = %e, "sandbox process died");
                let err = classify_death(engine, self.inner.config.memory_bytes, status, stderr);
                // Gone before it read the request, with no sign the request killed it:
                // the next child will do.
                if writing && err.class().is_none() {
                    return Err(SandboxError::Unavailable {
                        engine,
                        detail: format!("the process exited before reading the request: {err}"),
                    });
                }
                return Err(err);
            }
        };
        let reply: Reply = serde_json::from_slice(&frame).map_err(|e| SandboxError::Protocol {
            engine,
            detail: format!("malformed reply: {e}"),
        })?;
        self.healthy = !reply.retire;
        Ok(reply.response)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(mut proc) = self.proc.take() else {
            return;
        };
        if self.healthy {
            self.inner.idle.lock().expect("idle lock").push(proc);
            return;
        }
        // Mid-request (the task was cancelled or its future dropped) or retired: the
        // child's state is unknown and it must serve no one else. Dropping the `Child`
        // leaves the reaping to tokio.
        let _ = proc.child.start_kill();
    }
}

/// What a child's death says about the evaluation it was running.
///
/// Rust's allocation-error handler prints `memory allocation of N bytes failed` before
/// aborting, which is how the `RLIMIT_AS` bound shows; a stack overflow prints `has
/// overflowed its stack`. SIGXCPU is the CPU-time backstop. A SIGKILL stdworker did not
/// send is most likely the kernel's out-of-memory killer. A child that could not apply its
/// limits is a host problem (transient). Anything else is a crash.
pub fn classify_death(
    engine: &'static str,
    memory_bytes: u64,
    status: Option<ExitStatus>,
    stderr: String,
) -> SandboxError {
    if status.and_then(|s| s.code()) == Some(i32::from(super::child::EXIT_NO_LIMITS)) {
        return SandboxError::Unavailable {
            engine,
            detail: format!(
                "the sandbox process could not bound itself: {}",
                quote(&stderr)
            ),
        };
    }
    let signal = status.and_then(|s| s.signal());
    let memory_line = stderr.lines().find(|l| {
        let l = l.to_ascii_lowercase();
        [
            "memory allocation of",
            "out of memory",
            "capacity overflow",
            "overflowed its stack",
        ]
        .iter()
        .any(|m| l.contains(m))
    });
    if let Some(line) = memory_line {
        return SandboxError::Runaway {
            class: RunawayClass::Memory,
            detail: format!(
                "the {engine} evaluation exceeded its sandbox's memory bound of {} ({}); its sandbox process died and is replaced",
                mib(memory_bytes),
                quote(line)
            ),
        };
    }
    if signal == Some(Signal::XCPU.as_raw()) {
        return SandboxError::Runaway {
            class: RunawayClass::Deadline,
            detail: format!(
                "the {engine} evaluation used up its CPU-time limit; its sandbox process died and is replaced"
            ),
        };
    }
    if signal == Some(Signal::KILL.as_raw()) {
        return SandboxError::Runaway {
            class: RunawayClass::Memory,
            detail: format!(
                "the {engine} sandbox process was killed by SIGKILL that stdworker did not send (most likely the kernel's out-of-memory killer)"
            ),
        };
    }
    let status = match status {
        Some(s) => s.to_string(),
        None => "closed its output without exiting".to_string(),
    };
    SandboxError::Crashed {
        engine,
        status,
        stderr: quote(&stderr),
    }
}

fn quote(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(QUOTE_MAX) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// A duration for people: whole seconds when it is one, else milliseconds.
fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}
