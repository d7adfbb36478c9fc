//! `probe`: reports what the sandbox lets a guest do, for the host's sandbox tests.
//!
//! Each probe goes through std, exactly as an ordinary handler would reach the capability
//! (std on wasm32-wasip2 maps it to WASI p2 imports), and reports what happened instead of
//! failing, so one call shows the whole picture. The host is expected to deny files and
//! sockets, hand out no environment or arguments, fix the wall clock, freeze the monotonic
//! clock and make randomness a seeded constant.

use std::hash::{BuildHasher, RandomState};
use std::io::Read;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::converge::handler::types::{HandlerError, Outcome, Request, Stage};
use crate::{empty, with_status};

/// `{"ok": true}` or `{"ok": false, "error": "..."}` for one attempted capability.
fn attempt<T, E: std::fmt::Display>(result: Result<T, E>) -> Value {
    match result {
        Ok(_) => json!({"ok": true, "error": null}),
        Err(e) => json!({"ok": false, "error": e.to_string()}),
    }
}

/// 16 bytes from std's hash-map seeding, the randomness an ordinary guest uses without
/// asking (std draws it from WASI random). Two hashers show the per-thread seed sequence,
/// not just its first value.
fn random_hex() -> String {
    let mut hex = String::new();
    for _ in 0..2 {
        let h = RandomState::new().hash_one(0x5eed_u64);
        for b in h.to_le_bytes() {
            hex.push_str(&format!("{b:02x}"));
        }
    }
    hex
}

/// Serves `probe`: work runs the probes; other stages have nothing to do.
pub(crate) fn reconcile(req: &Request) -> Result<Outcome, HandlerError> {
    if req.stage != Stage::Work {
        return Ok(empty());
    }
    let started = Instant::now();
    let fs_read = attempt(std::fs::read_to_string("/etc/passwd"));
    let fs_write = attempt(std::fs::write("/tmp/converge-probe", b"probe"));
    let fs_list = attempt(std::fs::read_dir("/").map(Iterator::count));
    let tcp = attempt(std::net::TcpStream::connect("127.0.0.1:5432"));
    let mut stdin = Vec::new();
    let stdin_read = std::io::stdin().read_to_end(&mut stdin);
    // A clock before 1970 would be a host bug; report it as -1 rather than trapping.
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(-1);
    let status = json!({
        "fs_read": fs_read,
        "fs_write": fs_write,
        "fs_list": fs_list,
        "tcp_connect": tcp,
        "stdin": attempt(stdin_read.map(|_| ())),
        "stdin_bytes": stdin.len(),
        "env_vars": std::env::vars().count(),
        "args": std::env::args().count(),
        "wall_clock_secs": wall,
        "monotonic_elapsed_ns": started.elapsed().as_nanos() as u64,
        "random": random_hex(),
    });
    Ok(with_status(&status))
}
