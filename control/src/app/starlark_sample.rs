//! Runs a Starlark bundle's `compose` against the sample spec its provider config declares,
//! so the value flows of the children it produces can be type-checked at apply (issue 29).
//!
//! The interpreter cannot be linked here (the `starlark` crate turns on
//! `serde_json/arbitrary_precision` for every crate of a build), and a bundle is untrusted
//! code whose in-process limits are best effort, so it runs in a child process:
//! `converge-starlark-compose` (compose-dsl/starlark), found at `CONVERGE_STARLARK_BIN` or
//! beside the running executable. The child gets no environment, at most [`TIMEOUT`] of wall
//! clock (then it is killed) and at most [`MAX_OUTPUT`] bytes of stdout.
//!
//! The same child renders a CEL resource graph for a plan (`POST /api/v1/resources:plan`,
//! [`Runner::compose_cel`]): CEL has no cost model, so a graph that runs away must run where
//! it can be killed, as it does in the stdworker's sandbox, never in the API's process.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use converge_cel::ComposeOutput;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The environment variable naming the binary.
pub const BIN_ENV: &str = "CONVERGE_STARLARK_BIN";

/// The binary's file name, looked for beside the running executable.
pub const BIN_NAME: &str = "converge-starlark-compose";

/// Wall clock a sample compose may take, bundle load included.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Largest stdout read from the child.
pub const MAX_OUTPUT: usize = 4 << 20;

/// Most of the child's stderr kept, for a message.
const MAX_STDERR: usize = 4 << 10;

/// What a sample compose came to.
#[derive(Debug)]
pub enum Sample {
    /// The compose succeeded.
    Composed(ComposeOutput),
    /// The bundle does not load, its compose fails on the sample spec, or the child ran out
    /// of time or output, or died: the config's problem, with why.
    Failed(String),
    /// The compose could not be run here (no binary): the flows are left unchecked, with why.
    NotRun(String),
}

/// Where a bundle comes from.
#[derive(Debug, Clone, Copy)]
pub enum BundleSource<'a> {
    /// A zip (a provider config's `data`).
    Zip(&'a [u8]),
    /// A directory of its files (packed by the child).
    Dir(&'a Path),
}

/// Runs `converge-starlark-compose`.
#[derive(Debug, Clone)]
pub struct Runner {
    /// The binary.
    pub bin: PathBuf,
    /// Wall clock before the child is killed.
    pub timeout: Duration,
    /// Stdout cap.
    pub max_output: usize,
}

/// The child's answer on stdout.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    #[serde(default)]
    output: Option<ComposeOutput>,
    #[serde(default)]
    error: Option<String>,
}

impl Runner {
    /// The runner for this process: the binary at `$CONVERGE_STARLARK_BIN`, else
    /// `converge-starlark-compose` beside the current executable; why not, when neither is
    /// there.
    pub fn find() -> Result<Runner, String> {
        let bin = match std::env::var_os(BIN_ENV) {
            Some(p) if !p.is_empty() => {
                let p = PathBuf::from(p);
                if !p.is_file() {
                    return Err(format!("{BIN_ENV}={} is not a file", p.display()));
                }
                p
            }
            _ => {
                let exe = std::env::current_exe()
                    .map_err(|e| format!("the current executable is unknown: {e}"))?;
                let p = exe.with_file_name(BIN_NAME);
                if !p.is_file() {
                    return Err(format!(
                        "{BIN_NAME} is not installed beside {} (set {BIN_ENV})",
                        exe.display()
                    ));
                }
                p
            }
        };
        Ok(Runner::new(bin))
    }

    /// A runner of `bin` with the default bounds.
    pub fn new(bin: impl AsRef<Path>) -> Runner {
        Runner {
            bin: bin.as_ref().to_path_buf(),
            timeout: TIMEOUT,
            max_output: MAX_OUTPUT,
        }
    }

    /// Composes `bundle` with `spec` and `root`, under a provider config whose whole spec is
    /// `config_spec`: the child splits it as the stdworker does (its `limits` apply,
    /// `sample_spec` is dropped, the rest is `compose`'s config; see
    /// `converge_starlark::config`), so a compose here and on a worker cannot differ.
    pub async fn compose(
        &self,
        bundle: BundleSource<'_>,
        spec: &Value,
        config_spec: &Value,
        root: &Value,
    ) -> Sample {
        use base64::Engine;
        let mut input = serde_json::json!({
            "spec": spec,
            "effective_config": config_spec,
            "root": root,
        });
        let (key, value) = match bundle {
            BundleSource::Zip(bytes) => (
                "bundle",
                base64::engine::general_purpose::STANDARD.encode(bytes),
            ),
            BundleSource::Dir(dir) => ("bundle_dir", dir.display().to_string()),
        };
        input[key] = value.into();
        self.run(input.to_string().into_bytes()).await
    }

    /// Renders the CEL resource graph `graph` (a cel provider config's whole spec) for the
    /// root named `root_name` with `spec`, as the stdworker's cel provider does (under
    /// `converge_cel`'s default limits), in the child.
    pub async fn compose_cel(&self, graph: &Value, spec: &Value, root_name: &str) -> Sample {
        let input = serde_json::json!({
            "cel_graph": graph,
            "spec": spec,
            "root": {"name": root_name},
        });
        self.run(input.to_string().into_bytes()).await
    }

    /// Runs the child on `stdin` and reads its answer.
    async fn run(&self, stdin: Vec<u8>) -> Sample {
        let mut child = match tokio::process::Command::new(&self.bin)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                return Sample::NotRun(format!("{} cannot be started: {e}", self.bin.display()));
            }
        };
        let (Some(mut input), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Sample::NotRun("the child's pipes are missing".into());
        };
        let cap = self.max_output;
        // A child that stops reading early (it failed) closes the pipe: the write error is
        // not the answer, its exit and output are.
        tokio::spawn(async move {
            let _ = input.write_all(&stdin).await;
        });
        let stderr = tokio::spawn(async move {
            let mut err = Vec::new();
            let _ = stderr.take(MAX_STDERR as u64).read_to_end(&mut err).await;
            err
        });
        let read_out = async move {
            let mut out = Vec::new();
            stdout
                .take(cap as u64 + 1)
                .read_to_end(&mut out)
                .await
                .map(|_| out)
        };
        let out = match tokio::time::timeout(self.timeout, read_out).await {
            Ok(r) => r,
            Err(_) => {
                let _ = child.kill().await;
                return Sample::Failed(format!(
                    "the sample compose did not finish within {} s",
                    self.timeout.as_secs_f64()
                ));
            }
        };
        let out = match out {
            Ok(o) if o.len() > cap => {
                let _ = child.kill().await;
                return Sample::Failed(format!(
                    "the sample compose wrote more than {cap} bytes of output"
                ));
            }
            Ok(o) => o,
            Err(e) => {
                let _ = child.kill().await;
                return Sample::Failed(format!("reading the sample compose's output: {e}"));
            }
        };
        // Its pipes are closed: it is exiting (or closed them and hangs: bounded too).
        let status = match tokio::time::timeout(self.timeout, child.wait()).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Sample::Failed(format!("waiting for the sample compose: {e}")),
            Err(_) => {
                let _ = child.kill().await;
                return Sample::Failed(format!(
                    "the sample compose did not exit within {} s",
                    self.timeout.as_secs_f64()
                ));
            }
        };
        if !status.success() {
            let err = tokio::time::timeout(Duration::from_secs(1), stderr)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            let err = String::from_utf8_lossy(&err);
            return Sample::Failed(format!(
                "the sample compose failed ({status}){}",
                if err.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", err.trim())
                }
            ));
        }
        match serde_json::from_slice::<Answer>(&out) {
            Ok(Answer {
                output: Some(o),
                error: None,
            }) => Sample::Composed(o),
            Ok(Answer {
                error: Some(e),
                output: None,
            }) => Sample::Failed(e),
            Ok(_) => Sample::Failed("the sample compose gave neither output nor error".into()),
            Err(e) => Sample::Failed(format!("the sample compose's answer does not decode: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A shell script standing in for the binary (the runner's bounds do not depend on what
    /// runs).
    fn script(dir: &Path, name: &str, body: &str) -> Runner {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        Runner::new(p)
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("starlark-sample-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[tokio::test]
    async fn a_child_past_its_time_is_killed() {
        let d = tmp("slow");
        let mut r = script(&d, "slow", "cat > /dev/null; exec sleep 30");
        r.timeout = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let Sample::Failed(why) = r.run(b"{}".to_vec()).await else {
            panic!("a slow child fails");
        };
        assert!(why.contains("did not finish"), "{why}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn output_past_the_cap_is_refused() {
        let d = tmp("loud");
        let mut r = script(&d, "loud", "cat > /dev/null; head -c 100000 /dev/zero");
        r.max_output = 1000;
        let Sample::Failed(why) = r.run(b"{}".to_vec()).await else {
            panic!("a loud child fails");
        };
        assert!(why.contains("more than 1000 bytes"), "{why}");
    }

    #[tokio::test]
    async fn answers_exit_codes_and_a_missing_binary() {
        let d = tmp("answers");
        let ok = script(
            &d,
            "ok",
            r#"cat > /dev/null; echo '{"output": {"children": [{"kind": "vpc", "name": "a"}]}}'"#,
        );
        let Sample::Composed(o) = ok.run(b"{}".to_vec()).await else {
            panic!("an answer decodes");
        };
        assert_eq!(o.children[0].kind, "vpc");
        let err = script(&d, "err", r#"cat > /dev/null; echo '{"error": "boom"}'"#);
        assert!(matches!(err.run(b"{}".to_vec()).await, Sample::Failed(m) if m == "boom"));
        let env = script(
            &d,
            "env",
            r#"cat > /dev/null; echo "[${HOME}${USER}${CARGO_PKG_NAME}]" >&2; exit 3"#,
        );
        let Sample::Failed(why) = env.run(b"{}".to_vec()).await else {
            panic!("a failing child fails");
        };
        assert!(why.contains("exit status: 3"), "{why}");
        assert!(why.contains("[]"), "the environment is cleared: {why}");
        let none = Runner::new(d.join("missing"));
        assert!(matches!(none.run(b"{}".to_vec()).await, Sample::NotRun(_)));
    }
}
