//! End-to-end harness for stdworker: a real `converge` (from `CONVERGE_BIN`) on a fresh
//! database (plain, or serving TLS with an `AUTH_FILE`), a real `stdworker` process, an
//! HTTP(S) client, and polling waits with deadlines (never sleeps as synchronisation).

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the harness"
)]

pub mod hostile;

use std::{path::PathBuf, process::Stdio, time::Duration};

use converge_control::testing::TestDb;
pub use converge_control::testing::{spawn_ready, wait_for};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// The converge binary: `CONVERGE_BIN`, else `${CARGO_TARGET_DIR:-~/.cache/converge-target}
/// /debug/converge`.
pub fn converge_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CONVERGE_BIN") {
        return p.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/converge-target")
        });
    target.join("debug/converge")
}

fn log_level() -> String {
    std::env::var("TEST_LOG_LEVEL").unwrap_or_else(|_| "warn".into())
}

fn signal_pid(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
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

/// How a secured converge is reached over HTTPS: its port, the CA that signed its
/// certificate, and the token every API call carries.
pub struct Https {
    pub port: u16,
    pub ca_pem: String,
    pub token: String,
}

/// A running `converge serve` (ROLE=all) on its own fresh database.
pub struct Converge {
    pub db: TestDb,
    pub http: String,
    pub broker: String,
    pub client: reqwest::Client,
    /// Set when converge serves TLS with an AUTH_FILE ([`Converge::start_secure`]).
    pub https: Option<Https>,
    child: Child,
}

/// `converge serve` on the given ports with fast retries and `extra` environment.
fn converge_command(db: &TestDb, hp: u16, gp: u16, extra: &[(&str, PathBuf)]) -> Child {
    Command::new(converge_bin())
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("DATABASE_URL", &db.url)
        .env("LISTEN_ADDR", format!("127.0.0.1:{hp}"))
        .env("BROKER_LISTEN_ADDR", format!("127.0.0.1:{gp}"))
        .env("RETRY_BASE", "200ms")
        .env("RETRY_MAX", "1s")
        .env("SHUTDOWN_DRAIN", "2s")
        .env("DB_MAX_CONNECTIONS", "10")
        .env("LOG_LEVEL", log_level())
        .envs(extra.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn converge")
}

fn assert_converge_built() {
    let bin = converge_bin();
    assert!(
        bin.exists(),
        "{} is missing: build converge or set CONVERGE_BIN",
        bin.display()
    );
}

impl Converge {
    /// Starts converge with fast retries and waits until /readyz answers 200.
    pub async fn start() -> Converge {
        assert_converge_built();
        let db = TestDb::new().await;
        let (child, hp, gp) = spawn_ready("converge /readyz", |hp, gp| {
            converge_command(&db, hp, gp, &[])
        })
        .await;
        Converge {
            db,
            http: format!("http://127.0.0.1:{hp}"),
            broker: format!("http://127.0.0.1:{gp}"),
            client: reqwest::Client::new(),
            https: None,
            child,
        }
    }

    /// Starts converge serving TLS on both listeners with a certificate from `ca` (for
    /// 127.0.0.1 and localhost) and `principals` as its AUTH_FILE, plus `extra` environment
    /// (e.g. TLS_CLIENT_CA_FILE); files go to `dir`. Every API call then carries `token`.
    /// Waits until /readyz answers 200 over HTTPS.
    pub async fn start_secure(
        dir: &std::path::Path,
        ca: &converge_auth::testing::TestCa,
        principals: &Value,
        token: &str,
        extra: &[(&str, PathBuf)],
    ) -> Converge {
        assert_converge_built();
        let (cert, key) = ca.server("converge").write(dir, "server");
        let auth_file = dir.join("auth.json");
        std::fs::write(&auth_file, principals.to_string()).unwrap();
        let mut env = vec![
            ("TLS_CERT_FILE", cert),
            ("TLS_KEY_FILE", key),
            ("AUTH_FILE", auth_file),
        ];
        env.extend(extra.iter().cloned());
        let db = TestDb::new().await;
        let ca_pem = ca.pem();
        // A probed port can be taken before converge binds it: then it exits, and is
        // started again on new ports.
        for _ in 0..3 {
            let (hp, gp) = (
                converge_control::testing::free_port(),
                converge_control::testing::free_port(),
            );
            let mut child = converge_command(&db, hp, gp, &env);
            let ready = wait_for(
                Duration::from_secs(30),
                "converge /readyz over HTTPS",
                || {
                    let exited = child.try_wait().ok().flatten();
                    let ca_pem = ca_pem.clone();
                    async move {
                        if let Some(status) = exited {
                            return Some(Err(status));
                        }
                        let r = converge_auth::testing::https(
                            hp, &ca_pem, "GET", "/readyz", None, None,
                        )
                        .await
                        .ok()?;
                        (r.status == 200).then_some(Ok(()))
                    }
                },
            )
            .await;
            match ready {
                Ok(()) => {
                    return Converge {
                        db,
                        http: format!("https://127.0.0.1:{hp}"),
                        broker: format!("https://127.0.0.1:{gp}"),
                        client: reqwest::Client::new(),
                        https: Some(Https {
                            port: hp,
                            ca_pem,
                            token: token.to_string(),
                        }),
                        child,
                    };
                }
                Err(status) => eprintln!("converge exited ({status}); starting it again"),
            }
        }
        panic!("converge exited three times before it was ready");
    }

    /// Like [`Converge::call`] over HTTPS with `token` (none: an anonymous call) instead of
    /// the configured one. Only for a converge from [`Converge::start_secure`].
    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let h = self
            .https
            .as_ref()
            .expect("call_as needs a secured converge");
        let body = body.map(Value::to_string);
        let r = converge_auth::testing::https(
            h.port,
            &h.ca_pem,
            method.as_str(),
            &format!("/api/v1/{path}"),
            token,
            body.as_deref(),
        )
        .await
        .expect("HTTPS call");
        (
            r.status,
            serde_json::from_str(&r.body).unwrap_or(Value::Null),
        )
    }

    /// Sends `method` to `/api/v1/{path}` with an optional JSON body; returns (status, body).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        if let Some(h) = &self.https {
            return self.call_as(Some(&h.token), method, path, body).await;
        }
        let mut r = self
            .client
            .request(method, format!("{}/api/v1/{path}", self.http));
        if let Some(b) = body {
            r = r.json(b);
        }
        let r = r.send().await.unwrap();
        let s = r.status().as_u16();
        (s, r.json().await.unwrap_or(Value::Null))
    }

    /// PUTs a kind manifest; asserts it was accepted.
    pub async fn apply_manifest(&self, manifest: &Value) {
        let kind = manifest["kind"].as_str().unwrap();
        let (s, body) = self
            .call(
                reqwest::Method::PUT,
                &format!("kinds/{kind}/manifest"),
                Some(manifest),
            )
            .await;
        assert!((200..300).contains(&s), "manifest {kind}: {s} {body}");
    }

    /// Creates or replaces a provider config; asserts it was accepted.
    pub async fn put_config(&self, name: &str, kind: &str, is_default: bool, spec: Value) {
        let body = json!({"name": name, "kind": kind, "kind_version": 1, "is_default": is_default, "spec": spec});
        let (s, resp) = self
            .call(reqwest::Method::POST, "providerconfigs", Some(&body))
            .await;
        assert!((200..300).contains(&s), "providerconfig {name}: {s} {resp}");
    }

    /// Creates or replaces a provider config carrying `bundle` (sent base64 as `data`);
    /// asserts it was accepted.
    pub async fn put_config_bundle(
        &self,
        name: &str,
        kind: &str,
        is_default: bool,
        spec: Value,
        bundle: &[u8],
    ) {
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD.encode(bundle);
        let body = json!({"name": name, "kind": kind, "kind_version": 1, "is_default": is_default, "spec": spec, "data": data});
        let (s, resp) = self
            .call(reqwest::Method::POST, "providerconfigs", Some(&body))
            .await;
        assert!((200..300).contains(&s), "providerconfig {name}: {s} {resp}");
    }

    /// POSTs a resource (kind version 1); asserts it was accepted.
    pub async fn apply(&self, kind: &str, name: &str, spec: Value) {
        self.apply_body(&json!({"kind": kind, "kind_version": 1, "name": name, "spec": spec}))
            .await;
    }

    /// POSTs a resource body; asserts it was accepted.
    pub async fn apply_body(&self, body: &Value) {
        let (s, resp) = self
            .call(reqwest::Method::POST, "resources", Some(body))
            .await;
        assert!((200..300).contains(&s), "apply {body}: {s} {resp}");
    }

    /// GETs a resource (None on 404).
    pub async fn get(&self, kind: &str, name: &str) -> Option<Value> {
        let (s, body) = self
            .call(
                reqwest::Method::GET,
                &format!("resources/{kind}/{name}"),
                None,
            )
            .await;
        match s {
            404 => None,
            200 => Some(body),
            s => panic!("GET {kind}/{name}: {s} {body}"),
        }
    }

    /// Waits until the resource satisfies `pred`; returns it.
    pub async fn wait_resource(
        &self,
        kind: &str,
        name: &str,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        wait_for(timeout, what, || async {
            self.get(kind, name).await.filter(|v| pred(v))
        })
        .await
    }

    /// SIGTERM, then a bounded wait for the exit.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            signal_pid(pid, "TERM");
        }
        let _ = tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await;
    }
}

/// A running `stdworker`.
pub struct Stdworker {
    pub child: Child,
}

impl Stdworker {
    /// Starts the stdworker built with these tests, serving `exec_kinds`, with a clean
    /// environment plus `extra` (so a secret in the test's environment could only reach a
    /// handler through stdworker's own passing-on).
    pub fn start(broker: &str, exec_kinds: &str, extra: &[(&str, &str)]) -> Stdworker {
        let mut env = vec![("STDWORKER_EXEC_KINDS", exec_kinds)];
        env.extend_from_slice(extra);
        Self::start_env(broker, &env)
    }

    /// Starts the stdworker with a clean environment plus `env` (e.g. only
    /// `STDWORKER_STARLARK_KINDS`).
    pub fn start_env(broker: &str, env: &[(&str, &str)]) -> Stdworker {
        let extra = env;
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_stdworker"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("BROKER_ADDR", broker)
            .env("WORKER_NAME", "stdworker-test")
            .env("WORKER_DRAIN_TIMEOUT", "1s")
            .env("LOG_LEVEL", log_level())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Some(home) = std::env::var_os("HOME") {
            cmd.env("HOME", home);
        }
        for (k, v) in extra {
            cmd.env(k, v);
        }
        Stdworker {
            child: cmd.spawn().expect("spawn stdworker"),
        }
    }

    /// Starts the stdworker serving `kinds` with the wasm provider, journaling to `journal`,
    /// with a fresh compiled-component cache.
    pub fn wasm(broker: &str, kinds: &str, journal: &std::path::Path) -> Stdworker {
        let cache = scratch_dir("wasm-cache");
        Self::start_env(
            broker,
            &[
                ("STDWORKER_WASM_KINDS", kinds),
                ("STDWORKER_TASK_JOURNAL", journal.to_str().unwrap()),
                ("STDWORKER_WASM_CACHE_DIR", cache.to_str().unwrap()),
            ],
        )
    }

    /// SIGTERM (drain, then cancel what still runs) and wait for a clean exit.
    pub async fn stop(mut self) -> std::process::ExitStatus {
        if let Some(pid) = self.child.id() {
            signal_pid(pid, "TERM");
        }
        tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("stdworker exits after SIGTERM")
            .unwrap()
    }
}

/// This crate's directory: from the environment `cargo test` runs tests in, else where the
/// test was built. A target directory shared by two checkouts keeps a test binary built in
/// the first one, and with it the first checkout's path in `env!`.
pub fn manifest_dir() -> String {
    std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned())
}

/// Path of a file in this crate's `tests/fixtures`.
pub fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", manifest_dir())
}

/// A fresh scratch directory under the system temp dir.
pub fn scratch_dir(tag: &str) -> std::path::PathBuf {
    converge_auth::testing::scratch_dir(&format!("stdworker-{tag}"))
}

/// Done with its current generation: Ready at it, or Failed (a failure leaves `synced_gen`
/// behind).
pub fn settled(v: &Value) -> bool {
    (v["phase"] == "Ready" && v["synced_gen"] == v["generation"]) || v["phase"] == "Failed"
}

/// Re-applies `kind/name` with `spec` plus a fresh `"n"` until `done` holds: a config push
/// reaches the worker asynchronously, so a compose that settled on the old config is
/// followed by a new generation until the deadline.
pub async fn reapply_until(
    c: &Converge,
    kind: &str,
    name: &str,
    spec: &Value,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut n = 0u64;
    let done = &done;
    wait_for(Duration::from_secs(60), what, || {
        n += 1;
        let gen_n = n;
        async move {
            let r = c.get(kind, name).await?;
            if settled(&r) && done(&r) {
                return Some(r);
            }
            if settled(&r) {
                let mut s = spec.clone();
                s["n"] = json!(gen_n);
                c.apply(kind, name, s).await;
            }
            None
        }
    })
    .await
}

/// A leaf kind: one work reaction on spec changes, emitting status and conditions.
pub fn leaf_manifest(kind: &str) -> Value {
    json!({"kind": kind, "kind_version": 1, "reactions": [
        {"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]}]})
}

/// The JSON lines of a stdworker task journal (`STDWORKER_TASK_JOURNAL`); none yet = empty.
pub fn journal_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("journal line is JSON"))
        .collect()
}
