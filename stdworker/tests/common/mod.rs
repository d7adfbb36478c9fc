//! End-to-end harness for stdworker: a real `converge` (from `CONVERGE_BIN`, started with
//! `converge_testkit`) on a fresh database (plain, or serving TLS with an `AUTH_FILE`), a
//! real `stdworker` process, an HTTP(S) client, and polling waits with deadlines (never
//! sleeps as synchronisation).

#![allow(
    dead_code,
    unused_imports,
    reason = "each test binary uses a different subset of the harness"
)]

pub mod hostile;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use converge_engine::testing::TestDb;
use converge_testkit::{Api, Method, converge_bin, spawn_ready_tls, terminate};
pub use converge_testkit::{alive, spawn_ready, wait_for};
use serde_json::{Value, json};
use tokio::process::Child;

/// A running `converge serve` (ROLE=all) on its own fresh database.
pub struct Converge {
    pub db: TestDb,
    pub http: String,
    pub broker: String,
    /// Its HTTP API: over HTTPS with a token for [`Converge::start_secure`].
    pub api: Api,
    child: Child,
}

/// `converge serve` on the given ports with fast retries and `extra` environment.
fn converge_command(bin: &Path, db: &TestDb, hp: u16, gp: u16, extra: &[(&str, PathBuf)]) -> Child {
    converge_testkit::serve_on(bin, &db.url, hp, gp)
        .envs(extra.iter().map(|(k, v)| (k, v)))
        .spawn()
        .expect("spawn converge")
}

/// The API's calls (`call`, `call_as`, `get`, `apply_manifest`, `wait_resource`) are
/// converge's own.
impl std::ops::Deref for Converge {
    type Target = Api;

    fn deref(&self) -> &Api {
        &self.api
    }
}

impl Converge {
    /// Starts converge with fast retries and waits until /readyz answers 200.
    pub async fn start() -> Converge {
        let bin = converge_bin();
        let db = TestDb::new().await;
        let (child, hp, gp) = spawn_ready("converge /readyz", |hp, gp| {
            converge_command(&bin, &db, hp, gp, &[])
        })
        .await;
        let http = format!("http://127.0.0.1:{hp}");
        Converge {
            db,
            api: Api::new(&http),
            http,
            broker: format!("http://127.0.0.1:{gp}"),
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
        let bin = converge_bin();
        let mut env: Vec<(&str, PathBuf)> = converge_testkit::secure_env(dir, ca, principals);
        env.extend(extra.iter().cloned());
        let db = TestDb::new().await;
        let ca_pem = ca.pem();
        let (child, hp, gp) = spawn_ready_tls("converge /readyz over HTTPS", &ca_pem, |hp, gp| {
            converge_command(&bin, &db, hp, gp, &env)
        })
        .await;
        Converge {
            db,
            http: format!("https://127.0.0.1:{hp}"),
            broker: format!("https://127.0.0.1:{gp}"),
            api: Api::tls(hp, ca_pem, Some(token.to_string())),
            child,
        }
    }

    /// Creates or replaces a provider config; asserts it was accepted.
    pub async fn put_config(&self, name: &str, kind: &str, is_default: bool, spec: Value) {
        let body = json!({"name": name, "kind": kind, "kind_version": 1, "is_default": is_default, "spec": spec});
        let (s, resp) = self
            .call(Method::POST, "providerconfigs", Some(&body))
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
            .call(Method::POST, "providerconfigs", Some(&body))
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
        let (s, resp) = self.call(Method::POST, "resources", Some(body)).await;
        assert!((200..300).contains(&s), "apply {body}: {s} {resp}");
    }

    /// SIGTERM, then a bounded wait for the exit.
    pub async fn stop(mut self) {
        terminate(&mut self.child, Duration::from_secs(15)).await;
    }
}

/// A running `stdworker`.
pub struct Stdworker {
    pub child: Child,
}

impl Stdworker {
    /// Starts the stdworker built with these tests, serving `exec_kinds`, with a clean
    /// environment plus `extra` (so a secret in the test's environment could only reach a
    /// handler through stdworker's own passing-on). The test fixtures live in scratch
    /// directories, so any program may run (`STDWORKER_EXEC_ALLOW=*`) unless `extra` names
    /// an allowlist.
    pub fn start(broker: &str, exec_kinds: &str, extra: &[(&str, &str)]) -> Stdworker {
        let mut env = vec![
            ("STDWORKER_EXEC_KINDS", exec_kinds),
            ("STDWORKER_EXEC_ALLOW", "*"),
        ];
        env.extend_from_slice(extra);
        Self::start_env(broker, &env)
    }

    /// Starts the stdworker with a clean environment plus `env` (e.g. only
    /// `STDWORKER_STARLARK_KINDS`).
    pub fn start_env(broker: &str, env: &[(&str, &str)]) -> Stdworker {
        let mut cmd = converge_testkit::clean_command(env!("CARGO_BIN_EXE_stdworker"));
        cmd.env("BROKER_ADDR", broker)
            .env("WORKER_NAME", "stdworker-test")
            .env("WORKER_DRAIN_TIMEOUT", "1s");
        if let Some(home) = std::env::var_os("HOME") {
            cmd.env("HOME", home);
        }
        cmd.envs(env.iter().copied());
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
        terminate(&mut self.child, Duration::from_secs(15))
            .await
            .expect("stdworker exits after SIGTERM")
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
