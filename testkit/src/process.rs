//! Signals to the processes a test started, and whether a process still lives.

use std::{process::ExitStatus, time::Duration};

use tokio::process::Child;

/// Sends signal `sig` (a name: `TERM`, `KILL`, `STOP`) to `pid` with `kill(1)` (this crate
/// denies unsafe code); a process already gone is not an error.
pub fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

/// SIGTERM to `child`, then waits up to `within` for it to exit: its status, or `None` when
/// it did not exit in time (or had already been reaped).
pub async fn terminate(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    if let Some(pid) = child.id() {
        signal(pid, "TERM");
    }
    tokio::time::timeout(within, child.wait())
        .await
        .ok()
        .and_then(Result::ok)
}

/// Whether `pid` is a live process. A zombie counts as gone: it has exited, and its reaper
/// (here possibly a PID 1 that never reaps) is not ours to wait for.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        // The state is the first field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn terminate_ends_a_process_and_alive_sees_it_gone() {
        let mut child = tokio::process::Command::new("sleep")
            .arg("30")
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        assert!(alive(pid));
        let status = terminate(&mut child, Duration::from_secs(5)).await;
        assert!(status.is_some_and(|s| !s.success()), "{status:?}");
        assert!(!alive(pid));
    }
}
