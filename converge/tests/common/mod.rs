//! Shared end-to-end harness: a real `converge` process on a fresh database, real worker
//! processes, an HTTP client, and polling waits (never sleeps as synchronisation).

#![allow(
    dead_code,
    unused_imports,
    reason = "each test binary uses a different subset of the harness"
)]

pub mod raw_worker;
pub mod sse;

use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use converge_control::testing::TestDb;
pub use converge_control::testing::{free_port, spawn_ready, wait_for};
use converge_testkit::Api;
use serde_json::Value;
use tokio::process::{Child, Command};

/// Path of a binary built by `cargo build --workspace --bins` next to `converge`.
pub fn sibling_bin(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_BIN_EXE_converge")).with_file_name(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --workspace --bins` first",
        p.display()
    );
    p
}

/// The keys every test's converge seals secrets with (the testkit's test key), to open
/// what a test reads from the database.
pub fn test_keys() -> converge_engine::sealing::Keyring {
    let key = converge_engine::sealing::Key::from_file(
        "SECRETS_KEY_FILE",
        &converge_testkit::test_secrets_key_file(),
    )
    .expect("the test secrets key");
    converge_engine::sealing::Keyring::new(Some(key), Vec::new())
}

/// A `converge serve` command on `db_url` with loopback ports and `env` (a clean
/// environment, so nothing from the developer's shell leaks in).
pub fn serve_command(
    db_url: &str,
    http_port: u16,
    grpc_port: u16,
    env: &[(&str, &str)],
) -> Command {
    let mut cmd =
        converge_testkit::serve_on(env!("CARGO_BIN_EXE_converge"), db_url, http_port, grpc_port);
    cmd.envs(env.iter().copied());
    cmd
}

/// A running `converge serve` (ROLE=all) on its own fresh database.
pub struct Converge {
    pub db: TestDb,
    pub http: String,
    pub broker: String,
    pub client: reqwest::Client,
    api: Api,
    child: Child,
}

/// The API's calls (`get`, `apply_manifest`, `wait_resource`, `call_as`) are converge's own;
/// [`Converge::call`] takes its body by value.
impl std::ops::Deref for Converge {
    type Target = Api;

    fn deref(&self) -> &Api {
        &self.api
    }
}

impl Converge {
    /// Starts converge with fast retry settings plus `env`, and waits until /readyz is 200.
    pub async fn start(env: &[(&str, &str)]) -> Converge {
        let db = TestDb::new().await;
        let (child, hp, gp) = spawn_ready("converge /readyz", |hp, gp| {
            serve_command(&db.url, hp, gp, env)
                .spawn()
                .expect("spawn converge")
        })
        .await;
        let http = format!("http://127.0.0.1:{hp}");
        Converge {
            db,
            api: Api::new(&http),
            http,
            broker: format!("http://127.0.0.1:{gp}"),
            client: reqwest::Client::new(),
            child,
        }
    }

    /// Starts another `converge` process on the same database (a second pod), with `env`.
    pub async fn spawn_peer(&self, env: &[(&str, &str)]) -> Peer {
        let (child, hp, gp) = spawn_ready("peer /readyz", |hp, gp| {
            serve_command(&self.db.url, hp, gp, env)
                .spawn()
                .expect("spawn peer converge")
        })
        .await;
        Peer {
            child,
            http: format!("http://127.0.0.1:{hp}"),
            broker: format!("http://127.0.0.1:{gp}"),
        }
    }

    /// Starts a `ROLE=broker` process on the same database (a broker pod), its probes on
    /// `HEALTH_ADDR` (the [`Peer::http`] here), with `env`.
    pub async fn spawn_broker(&self, env: &[(&str, &str)]) -> Peer {
        let (child, hp, gp) = spawn_ready("broker /readyz", |hp, gp| {
            let health = format!("127.0.0.1:{hp}");
            let mut cmd = serve_command(&self.db.url, hp, gp, env);
            cmd.env("ROLE", "broker").env("HEALTH_ADDR", health);
            cmd.spawn().expect("spawn a broker converge")
        })
        .await;
        Peer {
            child,
            http: format!("http://127.0.0.1:{hp}"),
            broker: format!("http://127.0.0.1:{gp}"),
        }
    }

    /// The converge process's id (to read its `/proc/<pid>/status`).
    pub fn pid(&self) -> u32 {
        self.child.id().expect("converge is running")
    }

    /// SIGKILLs this converge (a crash: no drain, no lease release).
    pub async fn crash(&mut self) {
        self.child.kill().await.unwrap();
    }

    /// Starts converge again after a [`Converge::crash`], on the same database and the same
    /// ports (its workers reconnect to the address they know), with `env`; waits until
    /// /readyz is 200.
    pub async fn restart(&mut self, env: &[(&str, &str)]) {
        let port = |url: &str| -> u16 { url.rsplit(':').next().unwrap().parse().unwrap() };
        let (hp, gp) = (port(&self.http), port(&self.broker));
        self.child = serve_command(&self.db.url, hp, gp, env)
            .spawn()
            .expect("spawn converge");
        let url = format!("{}/readyz", self.http);
        wait_for(
            Duration::from_secs(30),
            "the restarted converge's /readyz",
            || async {
                let r = self.client.get(&url).send().await.ok()?;
                (r.status() == 200).then_some(())
            },
        )
        .await;
    }

    /// The hello example's manifest without its `status_schema`, for tests whose raw clients
    /// or in-process providers answer hello tasks with statuses of their own (the broker
    /// refuses a status the schema does not allow).
    pub fn hello_manifest_any_status(deadline_secs: i64) -> Value {
        let mut m = Self::hello_manifest(deadline_secs);
        m.as_object_mut().unwrap().remove("status_schema");
        m
    }

    /// The hello example's manifest (with an optional deadline).
    pub fn hello_manifest(deadline_secs: i64) -> Value {
        let mut m: Value = serde_json::from_str(
            &std::fs::read_to_string(format!(
                "{}/../examples/hello/kind-hello.json",
                manifest_dir()
            ))
            .unwrap(),
        )
        .unwrap();
        m["task_deadline_secs"] = deadline_secs.into();
        m
    }

    /// The manifest of one kind of the classic example (`classicbom`, `account`, `vpc`,
    /// `tgw`, `route`, ...), served by `classic-worker`.
    pub fn classic_manifest(kind: &str) -> Value {
        let path = format!(
            "{}/../examples/classic/manifests/{kind}.json",
            manifest_dir()
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// POSTs a resource; returns (status, X-Apply-Result, body).
    pub async fn apply(&self, body: &Value) -> (u16, String, Value) {
        let r = self
            .client
            .post(format!("{}/api/v1/resources", self.http))
            .json(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let result = r
            .headers()
            .get("x-apply-result")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        (status, result, r.json().await.unwrap_or(Value::Null))
    }

    /// Sends `method` to `/api/v1/{path}` with an optional JSON body; returns (status, body).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.api.call(method, path, body.as_ref()).await
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub async fn stop(mut self) {
        converge_testkit::terminate(&mut self.child, Duration::from_secs(15)).await;
    }
}

/// Waits until `kind/name` is Ready on the API at `http` (any process, not only a
/// [`Converge`]'s own), returning it; an unreachable API counts as not yet.
pub async fn wait_ready_at(
    client: &reqwest::Client,
    http: &str,
    kind: &str,
    name: &str,
    within: Duration,
) -> Value {
    let url = format!("{http}/api/v1/resources/{kind}/{name}");
    wait_for(
        within,
        &format!("{kind}/{name} Ready at {http}"),
        || async {
            let v: Value = client.get(&url).send().await.ok()?.json().await.ok()?;
            (v["phase"] == "Ready").then_some(v)
        },
    )
    .await
}

/// `GET /api/v1/cluster` on `api` once `pred` holds for the answer, which it returns.
///
/// # Panics
/// On an answer other than 200, or after `within`, naming `what`.
pub async fn cluster_when(
    api: &Api,
    within: Duration,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(within, what, || async {
        let (s, v) = api.call(reqwest::Method::GET, "cluster", None).await;
        assert_eq!(s, 200, "GET /api/v1/cluster: {v}");
        pred(&v).then_some(v)
    })
    .await
}

/// The sorted names of the workers of a member of `GET /api/v1/cluster` (none without one).
pub fn worker_names(member: Option<&Value>) -> Vec<String> {
    let mut names: Vec<String> = member
        .and_then(|m| m["workers"].as_array())
        .into_iter()
        .flatten()
        .map(|w| w["name"].as_str().unwrap_or_default().to_string())
        .collect();
    names.sort();
    names
}

/// Another converge process on the same database.
pub struct Peer {
    pub child: Child,
    pub http: String,
    pub broker: String,
}

/// A running example worker process.
pub struct Worker {
    pub child: Child,
    pub name: String,
}

impl Worker {
    /// Starts `hello-worker` against `broker` with `WORKER_NAME=name` plus `env`.
    pub fn hello(broker: &str, name: &str, env: &[(&str, &str)]) -> Worker {
        Worker::spawn("hello-worker", broker, name, env)
    }

    /// Starts the example worker binary `bin` against `broker` with `WORKER_NAME=name`.
    pub fn spawn(bin: &str, broker: &str, name: &str, env: &[(&str, &str)]) -> Worker {
        let mut cmd = Command::new(sibling_bin(bin));
        cmd.env("BROKER_ADDR", broker)
            .env("WORKER_NAME", name)
            .env("LOG_LEVEL", converge_testkit::log_level())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Worker {
            child: cmd.spawn().unwrap_or_else(|e| panic!("spawn {bin}: {e}")),
            name: name.into(),
        }
    }

    /// SIGKILL: no drain, no goodbye; the broker sees the stream end.
    pub async fn kill(mut self) -> Instant {
        let at = Instant::now();
        self.child.kill().await.unwrap();
        at
    }
}

/// Live leases of the hello kind: tasks running on workers, or claimed ahead and waiting in
/// a broker for a slot.
pub async fn hello_leases(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM work_queue WHERE kind = 'hello' AND lease_token IS NOT NULL",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// This crate's directory: from the environment `cargo test` runs tests in, else where the
/// test was built. A target directory shared by two checkouts keeps a test binary built in
/// the first one, and with it the first checkout's path in `env!`.
pub fn manifest_dir() -> String {
    std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned())
}

/// A zip of `files`, stored (not compressed): enough for a Starlark bundle, and no zip crate
/// in this workspace.
pub fn stored_zip(files: &[(&str, &str)]) -> Vec<u8> {
    fn crc32(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for b in data {
            crc ^= u32::from(*b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    let (mut out, mut central) = (Vec::new(), Vec::new());
    for (name, body) in files {
        let (name, body) = (name.as_bytes(), body.as_bytes());
        let offset = out.len() as u32;
        let (crc, len) = (crc32(body), body.len() as u32);
        // version 2.0, no flags, stored, 1980-01-01 00:00.
        let common = |v: &mut Vec<u8>| {
            for x in [20u16, 0, 0, 0, 0x21] {
                v.extend(x.to_le_bytes());
            }
            for x in [crc, len, len] {
                v.extend(x.to_le_bytes());
            }
            v.extend((name.len() as u16).to_le_bytes());
            v.extend(0u16.to_le_bytes());
        };
        out.extend(0x0403_4b50u32.to_le_bytes());
        common(&mut out);
        out.extend(name);
        out.extend(body);
        central.extend(0x0201_4b50u32.to_le_bytes());
        central.extend(20u16.to_le_bytes());
        common(&mut central);
        for x in [0u16, 0, 0] {
            central.extend(x.to_le_bytes());
        }
        central.extend(0u32.to_le_bytes());
        central.extend(offset.to_le_bytes());
        central.extend(name);
    }
    let (at, size) = (out.len() as u32, central.len() as u32);
    out.extend(central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    let n = files.len() as u16;
    for x in [0u16, 0, n, n] {
        out.extend(x.to_le_bytes());
    }
    out.extend(size.to_le_bytes());
    out.extend(at.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out
}
