//! Running one handler process: spawn it in its own process group with a scrubbed
//! environment, feed it the request, collect capped output, and make sure that when the run
//! ends — normally, on a timeout, on cancellation or because the future is dropped — nothing
//! of its process group is left running and the child itself has been reaped.

use std::{collections::BTreeMap, io, process::Stdio, time::Duration};

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt},
    process::{Child, Command},
    task::JoinHandle,
    time::Instant,
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// Size limits and grace periods of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most stdout bytes accepted; more is a terminal "output too large".
    pub stdout_max: usize,
    /// How many trailing stderr bytes are kept for the failure message.
    pub stderr_tail: usize,
    /// Time between SIGTERM and SIGKILL when a run is stopped.
    pub kill_grace: Duration,
    /// How long the pipes may stay open after the group is gone (a process that escaped the
    /// group with `setsid` can hold them) before reading stops.
    pub pipe_grace: Duration,
}

/// Default stdout cap: 4 MiB.
pub const DEFAULT_STDOUT_MAX: usize = 4 << 20;
/// Default stderr tail kept: 2 KiB.
pub const DEFAULT_STDERR_TAIL: usize = 2048;
/// Default SIGTERM → SIGKILL grace. Short: the SDK stops waiting for a cancelled handler
/// after 5 s, and a deadline already failed the task.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(1);

impl Default for Limits {
    fn default() -> Self {
        Self {
            stdout_max: DEFAULT_STDOUT_MAX,
            stderr_tail: DEFAULT_STDERR_TAIL,
            kill_grace: DEFAULT_KILL_GRACE,
            pipe_grace: Duration::from_secs(1),
        }
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// Program path or name (looked up in the child's `PATH`).
    pub program: String,
    /// The child's `argv[0]` when it should differ from `program` (an allowlisted program
    /// runs by its canonical path under the name its config gave).
    pub arg0: Option<String>,
    /// Arguments.
    pub args: Vec<String>,
    /// The child's whole environment (the caller decides what goes in).
    pub env: BTreeMap<String, String>,
}

/// Why a run was stopped before the program finished on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The task was cancelled (CancelTask, the SDK's deadline, worker shutdown).
    Cancelled,
    /// The config's `timeout_secs` passed.
    TimedOut(Duration),
    /// The task deadline passed.
    Deadline,
    /// stdout exceeded [`Limits::stdout_max`].
    OutputTooLarge,
}

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It was killed by this signal.
    Signal(i32),
}

/// Everything known about a finished run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    /// The child's pid (also its process group id).
    pub pid: u32,
    /// How it ended.
    pub exit: Exit,
    /// Set when the run was stopped by stdworker rather than ending by itself.
    pub stop: Option<Stop>,
    /// Everything it wrote to stdout (at most `stdout_max` bytes).
    pub stdout: Vec<u8>,
    /// The last `stderr_tail` bytes of stderr, lossily decoded.
    pub stderr_tail: String,
    /// How many earlier stderr bytes were dropped.
    pub stderr_dropped: u64,
}

/// A bounded tail of a byte stream: keeps the last `cap` bytes, counting the rest.
#[derive(Debug, Clone)]
pub struct Tail {
    cap: usize,
    buf: Vec<u8>,
    dropped: u64,
}

impl Tail {
    /// An empty tail keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            buf: Vec::new(),
            dropped: 0,
        }
    }

    /// Appends bytes. Trimming waits until twice the cap so it is amortised, not per write.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() > self.cap.saturating_mul(2).max(1) {
            self.trim();
        }
    }

    fn trim(&mut self) {
        if self.buf.len() > self.cap {
            let cut = self.buf.len() - self.cap;
            self.buf.drain(..cut);
            self.dropped += cut as u64;
        }
    }

    /// The kept bytes as text (a UTF-8 sequence cut at the front is dropped) and the number
    /// of bytes dropped before them.
    pub fn finish(mut self) -> (String, u64) {
        self.trim();
        let text = String::from_utf8_lossy(&self.buf);
        let text = text.trim_start_matches('\u{FFFD}').to_string();
        (text, self.dropped)
    }
}

/// Sends `sig` to the process group `pgid`. A group that is already gone is fine.
fn signal_group(pgid: u32, sig: Signal) {
    // Never pid 0/1 or a negative pid: kill(-1) or kill(0) would hit far more than the run.
    let Some(pid) = i32::try_from(pgid)
        .ok()
        .filter(|p| *p > 1)
        .and_then(Pid::from_raw)
    else {
        return;
    };
    match kill_process_group(pid, sig) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => warn!(pgid, error = %e, "cannot signal the handler's process group"),
    }
}

/// SIGKILLs the group when dropped while armed: if the task future is dropped mid-run
/// (the SDK aborts handlers that ignore cancellation) the processes must not outlive it.
/// Tokio reaps the dropped `Child` in the background.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            signal_group(pgid, Signal::KILL);
        }
    }
}

/// Reads `r` until EOF, `close`, or more than `max` bytes (then `overflow` is cancelled and
/// reading stops; the process is about to be killed).
async fn read_capped(
    mut r: impl AsyncRead + Unpin,
    max: usize,
    overflow: CancellationToken,
    close: CancellationToken,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::select! {
            biased;
            n = r.read(&mut chunk) => match n {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            () = close.cancelled() => break,
        };
        if out.len() + n > max {
            overflow.cancel();
            break;
        }
        out.extend_from_slice(&chunk[..n]);
    }
    out
}

/// Reads `r` until EOF or `close`, keeping a bounded tail.
async fn read_tail(mut r: impl AsyncRead + Unpin, cap: usize, close: CancellationToken) -> Tail {
    let mut tail = Tail::new(cap);
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            biased;
            n = r.read(&mut chunk) => match n {
                Ok(0) | Err(_) => break,
                Ok(n) => tail.push(&chunk[..n]),
            },
            () = close.cancelled() => break,
        }
    }
    tail
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        // Neither (a stopped/continued status) cannot come from wait(); call it transient.
        (None, None) => Exit::Code(-1),
    }
}

/// Stops a running child: SIGTERM to its group, up to `grace` for it to exit, then SIGKILL.
/// Returns once the child is reaped.
async fn terminate(
    child: &mut Child,
    pgid: u32,
    grace: Duration,
) -> io::Result<std::process::ExitStatus> {
    signal_group(pgid, Signal::TERM);
    if let Ok(status) = tokio::time::timeout(grace, child.wait()).await {
        return status;
    }
    debug!(pgid, "handler ignored SIGTERM; sending SIGKILL");
    signal_group(pgid, Signal::KILL);
    child.wait().await
}

/// Awaits a reader, giving it `grace` to reach EOF before telling it to stop.
async fn collect<T>(
    h: &mut JoinHandle<T>,
    close: &CancellationToken,
    grace: Duration,
) -> Option<T> {
    if let Ok(r) = tokio::time::timeout(grace, &mut *h).await {
        return r.ok();
    }
    close.cancel();
    h.await.ok()
}

/// Runs `cmd` once with `input` on stdin.
///
/// The run is stopped (SIGTERM, then SIGKILL after `limits.kill_grace`, to the whole group)
/// when `cancel` fires, when `deadline` or `timeout` passes, or when stdout exceeds its cap.
/// Whatever is left of the group when the program exits is SIGKILLed: a backgrounded
/// grandchild holding the pipes open would otherwise hang the task. An `Err` means the
/// program could not be started.
pub async fn run_process(
    cmd: &CommandSpec,
    input: Vec<u8>,
    cancel: &CancellationToken,
    deadline: Option<Instant>,
    timeout: Option<Duration>,
    limits: &Limits,
) -> io::Result<RunReport> {
    let mut command = Command::new(&cmd.program);
    if let Some(arg0) = &cmd.arg0 {
        command.arg0(arg0);
    }
    command
        .args(&cmd.args)
        .env_clear()
        .envs(&cmd.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so one kill(-pgid) reaches everything it starts.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let pid = child.id().unwrap_or(0);
    let mut guard = GroupGuard(Some(pid));

    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let writer = tokio::spawn(async move {
        if let Some(mut stdin) = stdin {
            // A handler that exits without reading stdin breaks the pipe: not an error.
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        }
    });
    let overflow = CancellationToken::new();
    let close = CancellationToken::new();
    let mut out_task = {
        let (overflow, close) = (overflow.clone(), close.clone());
        let max = limits.stdout_max;
        tokio::spawn(async move {
            match stdout {
                Some(s) => read_capped(s, max, overflow, close).await,
                None => Vec::new(),
            }
        })
    };
    let mut err_task = {
        let close = close.clone();
        let cap = limits.stderr_tail;
        tokio::spawn(async move {
            match stderr {
                Some(s) => read_tail(s, cap, close).await,
                None => Tail::new(cap),
            }
        })
    };
    // Kill the reader tasks too if this future is dropped.
    let _abort_readers = AbortOnDrop(vec![
        writer.abort_handle(),
        out_task.abort_handle(),
        err_task.abort_handle(),
    ]);

    // The sooner of the config timeout and the task deadline, labelled with its reason.
    let now = Instant::now();
    let limit = match (
        timeout.map(|t| (now + t, Stop::TimedOut(t))),
        deadline.map(|d| (d, Stop::Deadline)),
    ) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    };
    let timer = async {
        match limit {
            Some((at, why)) => {
                tokio::time::sleep_until(at).await;
                why
            }
            None => std::future::pending().await,
        }
    };

    let (stop, status) = tokio::select! {
        status = child.wait() => (None, status?),
        () = cancel.cancelled() => (Some(Stop::Cancelled), terminate(&mut child, pid, limits.kill_grace).await?),
        why = timer => (Some(why), terminate(&mut child, pid, limits.kill_grace).await?),
        () = overflow.cancelled() => (Some(Stop::OutputTooLarge), terminate(&mut child, pid, limits.kill_grace).await?),
    };
    // Whatever the program left behind in its group goes with it.
    signal_group(pid, Signal::KILL);
    guard.0 = None;
    writer.abort();

    let stdout = collect(&mut out_task, &close, limits.pipe_grace)
        .await
        .unwrap_or_default();
    let tail = collect(&mut err_task, &close, limits.pipe_grace)
        .await
        .unwrap_or_else(|| Tail::new(limits.stderr_tail));
    // The reader may have hit the cap just as the program exited on its own.
    let stop = stop.or_else(|| overflow.is_cancelled().then_some(Stop::OutputTooLarge));
    let (stderr_tail, stderr_dropped) = tail.finish();
    Ok(RunReport {
        pid,
        exit: exit_of(status),
        stop,
        stdout,
        stderr_tail,
        stderr_dropped,
    })
}

/// Aborts tokio tasks when dropped.
struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}
