//! Secrets at rest (issue 46 item 3) against the real `converge`, real PostgreSQL and its
//! real `pg_dump`, and an in-process Rust SDK worker over real gRPC: a provider config's
//! writeOnly values are stored sealed (no plain secret in a dump of the whole database,
//! every API read masked) and reach a worker of the kind in plain text; `converge secrets
//! rotate` moves every value to a new key (and seals values stored plain before sealing
//! existed) while every value stays readable; without a key a secret is refused outside
//! `converge dev`, which makes its own.

mod common;

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Converge, spawn_ready, wait_for};
use converge_control::testing::TestDb;
use converge_engine::sealing::{self, Key, Keyring};
use converge_sdk::{
    HandlerError, KindVersion, Outcome, Provider, ProviderConfig, ReactionRequest, Registry,
    WorkerConfig,
};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(30);

/// The default config's secret, an override's, one stored plain before sealing existed, and
/// one sealed under a key no process has.
const DEFAULT_SECRET: &str = "default-secret-6b1f0e27";
const OVERRIDE_SECRET: &str = "override-secret-93c2aa51";
const LEGACY_SECRET: &str = "legacy-plain-41d7e9c3";
const LOST_SECRET: &str = "lost-key-secret-0c55d2";
const ALL: [&str; 4] = [DEFAULT_SECRET, OVERRIDE_SECRET, LEGACY_SECRET, LOST_SECRET];

fn manifest() -> Value {
    json!({"kind": "safe", "kind_version": 1,
        "config_schema": {"type": "object", "additionalProperties": false, "properties": {
            "token": {"type": "string", "writeOnly": true},
            "region": {"type": "string"}}},
        "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]})
}

fn config(name: &str, default: bool, spec: Value) -> Value {
    json!({"name": name, "kind": "safe", "kind_version": 1, "is_default": default, "spec": spec})
}

/// Records the defaults pushed to it and every task's effective config.
struct Recorder {
    pushed: Arc<Mutex<Vec<Value>>>,
    effective: Arc<Mutex<Vec<Value>>>,
}

impl Provider for Recorder {
    fn kind(&self) -> KindVersion {
        KindVersion::new("safe", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        self.effective.lock().unwrap().push(req.effective_config());
        Ok(Outcome::status(json!({"seen": true})))
    }

    fn on_config(&self, cfg: ProviderConfig) {
        self.pushed
            .lock()
            .unwrap()
            .push(cfg.spec.unwrap_or(Value::Null));
    }
}

/// A worker of `safe` on `broker`, and what it records; stopped by cancelling the token.
struct Worker {
    stop: CancellationToken,
    pushed: Arc<Mutex<Vec<Value>>>,
    effective: Arc<Mutex<Vec<Value>>>,
}

impl Worker {
    fn start(broker: &str) -> Worker {
        let w = Worker {
            stop: CancellationToken::new(),
            pushed: Arc::default(),
            effective: Arc::default(),
        };
        tokio::spawn(converge_sdk::run_worker(
            WorkerConfig::new(broker.to_string()),
            Registry::new().with(Recorder {
                pushed: w.pushed.clone(),
                effective: w.effective.clone(),
            }),
            w.stop.clone().cancelled_owned(),
        ));
        w
    }

    async fn wait_pushed(&self, want: &Value) {
        wait_for(T, &format!("the default {want} pushed"), || async {
            self.pushed.lock().unwrap().contains(want).then_some(())
        })
        .await;
    }

    async fn wait_task_with(&self, want: &Value) {
        wait_for(T, &format!("a task with config {want}"), || async {
            self.effective.lock().unwrap().contains(want).then_some(())
        })
        .await;
    }
}

/// A resource of `safe` named `name` using config `cfg` (`None`: the default).
async fn resource(c: &Converge, name: &str, cfg: Option<&str>) {
    let body = json!({"kind": "safe", "kind_version": 1, "name": name, "spec": {},
                      "provider_config_ref": cfg});
    let (s, _, body) = c.apply(&body).await;
    assert_eq!(s, 201, "{body}");
}

/// A `pg_dump` of the whole database at `url` (schema and data), from the PostgreSQL the
/// test cluster runs.
fn pg_dump(url: &str) -> String {
    let out = std::process::Command::new(converge_testkit::pg_bin_dir().join("pg_dump"))
        .args(["--no-owner", "--no-privileges", url])
        .output()
        .expect("run pg_dump");
    assert!(
        out.status.success(),
        "pg_dump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("a text dump")
}

/// Asserts no secret of [`ALL`] is in `text` (`what` says where it came from).
fn holds_no_secret(what: &str, text: &str) {
    for s in ALL {
        assert!(!text.contains(s), "{what} holds the secret {s:?}");
    }
}

/// Every API read of the configs: one of each name, and the list.
async fn api_reads_are_masked(c: &Converge, names: &[&str]) {
    for name in names {
        let (s, one) = c
            .call(Method::GET, &format!("providerconfigs/{name}"), None)
            .await;
        assert_eq!(s, 200, "{one}");
        holds_no_secret(&format!("GET {name}"), &one.to_string());
        assert_eq!(one["spec"]["token"], "***", "{one}");
    }
    let (s, list) = c.call(Method::GET, "providerconfigs", None).await;
    assert_eq!(s, 200, "{list}");
    holds_no_secret("the list", &list.to_string());
}

/// A fresh random key file in `dir`.
fn key_file(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(name);
    std::fs::write(&path, sealing::new_key_base64()).unwrap();
    let id = Key::from_file("test", &path).unwrap().id().to_string();
    (path, id)
}

/// The key id of every envelope stored, by config name and pointer.
async fn stored_key_ids(c: &Converge) -> Vec<(String, String, String)> {
    let rows: Vec<(String, Value)> =
        sqlx::query_as("SELECT name, spec FROM providerconfigs ORDER BY name")
            .fetch_all(&c.db.pool)
            .await
            .unwrap();
    rows.into_iter()
        .flat_map(|(name, spec)| {
            sealing::envelopes(&spec)
                .into_iter()
                .map(move |(p, kid)| (name.clone(), p, kid))
        })
        .collect()
}

/// `converge secrets <action>` on `c`'s database with `env`: (succeeded, stdout + stderr).
async fn secrets(c: &Converge, action: &str, env: &[(&str, &str)]) -> (bool, String) {
    let out = converge_testkit::clean_command(env!("CARGO_BIN_EXE_converge"))
        .args(["secrets", action])
        .env("DATABASE_URL", &c.db.url)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dump_holds_no_secret_and_a_worker_of_the_kind_gets_it() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&manifest()).await;
    let default = json!({"token": DEFAULT_SECRET, "region": "eu"});
    let (s, echo) = c
        .call(
            Method::POST,
            "providerconfigs",
            Some(config("safe-default", true, default.clone())),
        )
        .await;
    assert_eq!(s, 201, "{echo}");
    holds_no_secret("the write's echo", &echo.to_string());
    let (s, echo) = c
        .call(
            Method::POST,
            "providerconfigs",
            Some(config(
                "safe-override",
                false,
                json!({"token": OVERRIDE_SECRET}),
            )),
        )
        .await;
    assert_eq!(s, 201, "{echo}");

    // The database, dumped whole: envelopes under the test key, no secret.
    let dump = pg_dump(&c.db.url);
    holds_no_secret("pg_dump", &dump);
    let test_kid = common::test_keys().current_id().unwrap().to_string();
    assert!(dump.contains("\"$enc\": \"v1\""), "no envelope in the dump");
    assert!(dump.contains(&test_kid), "the key id is not in the dump");
    api_reads_are_masked(&c, &["safe-default", "safe-override"]).await;

    // A worker of the kind gets the plain values: the default pushed, the override in its
    // resource's task (merged over the default).
    let w = Worker::start(&c.broker);
    resource(&c, "uses-default", None).await;
    resource(&c, "uses-override", Some("safe-override")).await;
    w.wait_pushed(&default).await;
    w.wait_task_with(&default).await;
    w.wait_task_with(&json!({"token": OVERRIDE_SECRET, "region": "eu"}))
        .await;
    for name in ["uses-default", "uses-override"] {
        c.wait_resource("safe", name, "Ready", T, |v| v["phase"] == "Ready")
            .await;
    }
    // Still nothing in plain text anywhere once tasks ran (events, history, status).
    holds_no_secret("pg_dump after the tasks", &pg_dump(&c.db.url));

    // "***" written back keeps the sealed secret; the worker gets the edit with it.
    let (s, back) = c
        .call(
            Method::POST,
            "providerconfigs",
            Some(config(
                "safe-default",
                true,
                json!({"token": "***", "region": "ap"}),
            )),
        )
        .await;
    assert_eq!(s, 200, "{back}");
    w.wait_pushed(&json!({"token": DEFAULT_SECRET, "region": "ap"}))
        .await;
    holds_no_secret("pg_dump after the edit", &pg_dump(&c.db.url));

    // An envelope is converge's own: a client sending one is refused.
    let stored: Value =
        sqlx::query_scalar("SELECT spec FROM providerconfigs WHERE name = 'safe-override'")
            .fetch_one(&c.db.pool)
            .await
            .unwrap();
    let (s, body) = c
        .call(
            Method::POST,
            "providerconfigs",
            Some(config("copied", false, stored)),
        )
        .await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(body["errors"][0]["location"], "/spec/token", "{body}");
    w.stop.cancel();
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rotation_moves_every_value_to_the_new_key_and_keeps_it_readable() {
    let dir = tempdir("rotate");
    let (a, a_id) = key_file(&dir, "a.key");
    let (b, b_id) = key_file(&dir, "b.key");
    let (lost, _) = key_file(&dir, "lost.key");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let mut c = Converge::start(&[("SECRETS_KEY_FILE", a)]).await;
    c.apply_manifest(&manifest()).await;
    let default = json!({"token": DEFAULT_SECRET, "region": "eu"});
    for body in [
        config("safe-default", true, default.clone()),
        config("safe-override", false, json!({"token": OVERRIDE_SECRET})),
    ] {
        let (s, echo) = c.call(Method::POST, "providerconfigs", Some(body)).await;
        assert_eq!(s, 201, "{echo}");
    }
    // A config written before secrets were sealed: its value is plain in the database.
    sqlx::query(
        "INSERT INTO providerconfigs (name, kind, kind_version, spec)
         VALUES ('safe-legacy', 'safe', 1, $1)",
    )
    .bind(json!({"token": LEGACY_SECRET}))
    .execute(&c.db.pool)
    .await
    .unwrap();
    assert!(
        stored_key_ids(&c)
            .await
            .iter()
            .all(|(_, _, kid)| *kid == a_id)
    );
    // The broker delivers the plain legacy value as it is.
    let w = Worker::start(&c.broker);
    resource(&c, "legacy-1", Some("safe-legacy")).await;
    w.wait_task_with(&json!({"token": LEGACY_SECRET, "region": "eu"}))
        .await;
    w.stop.cancel();

    // New key B, A kept to open what is not rotated yet.
    let both = [("SECRETS_KEY_FILE", b), ("SECRETS_OLD_KEY_FILES", a)];
    c.crash().await;
    c.restart(&both).await;
    let w = Worker::start(&c.broker);
    w.wait_pushed(&default).await;
    let (ok, status) = secrets(&c, "status", &both).await;
    assert!(ok, "{status}");
    assert!(
        status.contains(&format!(
            "key {a_id}: 2 sealed values (old key, configured)"
        )) && status.contains("plain text: 1 writeOnly values")
            && status.contains("a rotation would re-seal 3 configs"),
        "{status}"
    );
    let (ok, out) = secrets(&c, "rotate", &both).await;
    assert!(ok, "{out}");
    assert!(out.contains("re-sealed 3 configs"), "{out}");
    holds_no_secret("the rotation's output", &out);
    let ids = stored_key_ids(&c).await;
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.iter().all(|(_, _, kid)| *kid == b_id), "{ids:?}");
    holds_no_secret("pg_dump after the rotation", &pg_dump(&c.db.url));
    // Run again: nothing left to do.
    let (ok, out) = secrets(&c, "rotate", &both).await;
    assert!(ok && out.contains("re-sealed 0 configs"), "{out}");
    // The running process opens the rotated values (its B is the current key).
    w.wait_pushed(&default).await;
    resource(&c, "override-1", Some("safe-override")).await;
    w.wait_task_with(&json!({"token": OVERRIDE_SECRET, "region": "eu"}))
        .await;
    w.stop.cancel();

    // A restart with B alone: every value still reaches a worker.
    c.crash().await;
    c.restart(&[("SECRETS_KEY_FILE", b)]).await;
    let w = Worker::start(&c.broker);
    w.wait_pushed(&default).await;
    resource(&c, "override-2", Some("safe-override")).await;
    resource(&c, "legacy-2", Some("safe-legacy")).await;
    w.wait_task_with(&json!({"token": OVERRIDE_SECRET, "region": "eu"}))
        .await;
    w.wait_task_with(&json!({"token": LEGACY_SECRET, "region": "eu"}))
        .await;
    api_reads_are_masked(&c, &["safe-default", "safe-override", "safe-legacy"]).await;

    // A value sealed under a key no process has: the rotation names it and fails, without
    // a panic or the value; the API still masks it; the worker never gets it opened.
    let lost_key = Keyring::new(Some(Key::from_file("test", &lost).unwrap()), Vec::new());
    let sealed = lost_key
        .seal("safe", "/token", &json!(LOST_SECRET))
        .unwrap();
    sqlx::query(
        "INSERT INTO providerconfigs (name, kind, kind_version, spec)
         VALUES ('safe-lost', 'safe', 1, $1)",
    )
    .bind(json!({"token": sealed}))
    .execute(&c.db.pool)
    .await
    .unwrap();
    let (ok, out) = secrets(&c, "rotate", &[("SECRETS_KEY_FILE", b)]).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains("cannot open: config safe-lost: /token: ")
            && out.contains("not configured")
            && !out.contains("panicked"),
        "{out}"
    );
    holds_no_secret("the failed rotation's output", &out);
    api_reads_are_masked(&c, &["safe-lost"]).await;
    resource(&c, "lost-1", Some("safe-lost")).await;
    c.wait_resource("safe", "lost-1", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    {
        // It went out still sealed: the worker got the envelope, not the value.
        let seen = w.effective.lock().unwrap();
        assert!(!seen.iter().any(|e| e.to_string().contains(LOST_SECRET)));
        assert!(
            seen.iter().any(|e| sealing::is_envelope(&e["token"])),
            "{seen:?}"
        );
    }
    w.stop.cancel();
    c.stop().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_key_a_secret_is_refused_and_dev_makes_its_own_key() {
    let c = Converge::start(&[("SECRETS_KEY_FILE", "")]).await;
    c.apply_manifest(&manifest()).await;
    let (s, body) = c
        .call(
            Method::POST,
            "providerconfigs",
            Some(config("refused", true, json!({"token": DEFAULT_SECRET}))),
        )
        .await;
    assert_eq!(s, 400, "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("SECRETS_KEY_FILE") && detail.contains("/token"),
        "{body}"
    );
    holds_no_secret("the refusal", &body.to_string());
    // Nothing secret, nothing to seal: stored.
    for (name, spec) in [
        ("no-token", json!({"region": "eu"})),
        ("empty-token", json!({"token": ""})),
    ] {
        let (s, body) = c
            .call(
                Method::POST,
                "providerconfigs",
                Some(config(name, false, spec)),
            )
            .await;
        assert_eq!(s, 201, "{name}: {body}");
    }
    c.stop().await;

    // `converge dev` (on a database of its own here, so no private PostgreSQL) makes a key
    // in its data dir and seals with it.
    let dir = tempdir("dev");
    let db = TestDb::new().await;
    let (mut child, hp, _) = spawn_ready("converge dev /readyz", |hp, gp| {
        converge_testkit::clean_command(env!("CARGO_BIN_EXE_converge"))
            .arg("dev")
            .env("DATABASE_URL", &db.url)
            .env("CONVERGE_DEV_DIR", &dir)
            .env("LISTEN_ADDR", format!("127.0.0.1:{hp}"))
            .env("BROKER_LISTEN_ADDR", format!("127.0.0.1:{gp}"))
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn converge dev")
    })
    .await;
    let api = converge_testkit::Api::new(format!("http://127.0.0.1:{hp}"));
    api.apply_manifest(&manifest()).await;
    let (s, body) = api
        .call(
            Method::POST,
            "providerconfigs",
            Some(&config("dev-cfg", true, json!({"token": DEFAULT_SECRET}))),
        )
        .await;
    assert_eq!(s, 201, "{body}");
    let key = dir.join("secrets.key");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", key.display());
    }
    let dev_kid = Key::from_file("test", &key).unwrap().id().to_string();
    let spec: Value = sqlx::query_scalar("SELECT spec FROM providerconfigs WHERE name = 'dev-cfg'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(spec["token"]["kid"], dev_kid.as_str(), "{spec}");
    holds_no_secret("dev's stored config", &spec.to_string());
    converge_testkit::terminate(&mut child, Duration::from_secs(15)).await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fresh directory under the temporary directory for this test.
fn tempdir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "converge-secrets-{what}-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
