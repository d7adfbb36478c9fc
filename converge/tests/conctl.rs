//! `conctl` against a live `converge` with a real hello worker: apply a YAML file holding a
//! manifest and a resource, list, get (table, JSON, YAML), reconcile, delete, and the error
//! paths (a spec the kind refuses, an unreachable server); against a converge serving
//! HTTPS with an AUTH_FILE: tokens and the CA from flags or the environment, the 401 and 403
//! messages, and the TLS mistakes named. The GitOps path: a directory of every document type
//! applied in dependency order, duplicates refused, `sync --prune` (and its `--plan`). The
//! views: `get KIND/NAME`, `list --owner`, status in tables, `events`, `history`, `rollback`; a closed
//! stdout; and `wait` after `reconcile` on a resource that recovers.

mod common;

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use common::{Converge, Worker, free_port, manifest_dir};
use converge_auth::testing::{TestCa, principal_line};
use converge_control::testing::wait_for;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::Command,
};

const T: Duration = Duration::from_secs(30);

/// What one conctl run did.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs conctl against `server` with `args`, feeding `stdin` when given.
async fn conctl(server: &str, args: &[&str], stdin: Option<&str>) -> Run {
    conctl_env(server, &[], args, stdin).await
}

/// Runs conctl with only `env` in its environment.
async fn conctl_env(server: &str, env: &[(&str, &str)], args: &[&str], stdin: Option<&str>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_conctl"));
    cmd.env_clear()
        .envs(env.iter().copied())
        .arg("--server")
        .arg(server)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn conctl");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.as_bytes()).await.unwrap();
        drop(pipe);
    }
    let out = child.wait_with_output().await.unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs conctl and asserts it succeeded.
async fn ok(server: &str, args: &[&str]) -> String {
    let r = conctl(server, args, None).await;
    assert_eq!(
        r.code, 0,
        "conctl {args:?} failed:\n{}{}",
        r.stdout, r.stderr
    );
    r.stdout
}

/// The hello manifest and a resource of it, as one two-document YAML stream.
fn hello_yaml() -> String {
    let manifest = serde_yaml::to_string(&Converge::hello_manifest(30)).unwrap();
    format!(
        "{manifest}---\n\
         kind: hello\n\
         kind_version: 1\n\
         name: world\n\
         labels:\n  team: web\n\
         spec:\n  greeting: hi\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_list_get_reconcile_delete_round_trip() {
    let c = Converge::start(&[]).await;
    let _w = Worker::hello(&c.broker, "w1", &[]);
    let dir = std::env::temp_dir().join(format!("conctl-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hello.yaml");
    std::fs::write(&file, hello_yaml()).unwrap();
    let file = file.to_str().unwrap();
    let s = c.http.as_str();

    let out = ok(s, &["apply", "-f", file]).await;
    assert!(out.contains("manifest/hello: created"), "{out}");
    assert!(out.contains("hello/world: created"), "{out}");
    let out = ok(s, &["apply", "-f", file]).await;
    assert!(out.contains("manifest/hello: unchanged"), "{out}");
    assert!(out.contains("hello/world: unchanged"), "{out}");

    let r: Value = wait_for(T, "conctl get shows Ready", || async {
        let out = ok(s, &["get", "resource", "hello/world", "-o", "json"]).await;
        let v: Value = serde_json::from_str(&out).expect("get -o json prints JSON");
        (v["phase"] == "Ready").then_some(v)
    })
    .await;
    assert_eq!(r["status"]["message"], "hi, world!");
    assert_eq!(r["labels"]["team"], "web");

    let out = ok(s, &["get", "resource", "hello/world"]).await;
    let header = out.lines().next().unwrap();
    for col in [
        "KIND", "NAME", "PHASE", "READY", "GEN", "SYNCED", "AGE", "MESSAGE",
    ] {
        assert!(header.contains(col), "{out}");
    }
    assert!(out.lines().nth(1).unwrap().starts_with("hello"), "{out}");
    assert!(
        out.contains("Conditions:") && out.contains("Greeted"),
        "{out}"
    );
    let out = ok(s, &["get", "resource", "hello/world", "-o", "yaml"]).await;
    let v: Value = serde_yaml::from_str(&out).unwrap();
    assert_eq!(v["name"], "world");

    let out = ok(s, &["list"]).await;
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        [
            "KIND", "NAME", "PHASE", "READY", "CHILDREN", "GEN", "MESSAGE"
        ]
    );
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["hello", "world", "Ready", "True", "0", "1", "-"]
    );
    let out = ok(
        s,
        &["list", "resources", "--all", "-l", "team:web", "-o", "json"],
    )
    .await;
    let rows: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    let out = ok(s, &["list", "--all", "-l", "team:db", "-o", "json"]).await;
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        Value::Array(vec![])
    );
    let out = ok(s, &["list", "manifests"]).await;
    assert!(
        out.contains("hello") && out.contains("work(specChange)"),
        "{out}"
    );
    let out = ok(
        s,
        &[
            "get",
            "manifest",
            "hello",
            "--kind-version",
            "1",
            "-o",
            "yaml",
        ],
    )
    .await;
    let m: Value = serde_yaml::from_str(&out).unwrap();
    assert_eq!(m["kind"], "hello");

    let out = ok(s, &["reconcile", "hello/world"]).await;
    assert!(out.contains("hello/world: reconcile queued"), "{out}");
    let out = ok(s, &["quarantine", "hello/world"]).await;
    assert!(out.contains("quarantined"), "{out}");
    let out = ok(s, &["unquarantine", "hello/world"]).await;
    assert!(out.contains("unquarantined"), "{out}");

    // Problems first: a quarantined resource created after world heads `--sort problems`.
    let (st, _, body) = c
        .apply(&json!({"kind": "hello", "kind_version": 1, "name": "second", "spec": {}}))
        .await;
    assert_eq!(st, 201, "{body}");
    ok(s, &["quarantine", "hello/second"]).await;
    let names = |out: String| -> Vec<String> {
        let rows: Value = serde_json::from_str(&out).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    let by_age = ok(s, &["list", "--all", "-o", "json"]).await;
    assert_eq!(names(by_age), ["world", "second"]);
    let problems = ok(s, &["list", "--all", "--sort", "problems", "-o", "json"]).await;
    assert_eq!(names(problems), ["second", "world"]);
    ok(s, &["unquarantine", "hello/second"]).await;
    ok(s, &["delete", "resource", "hello/second"]).await;
    wait_for(T, "hello/second removed", || async {
        c.get("hello", "second").await.is_none().then_some(())
    })
    .await;

    // A kind version with a resource is kept, and the problem says why.
    let r = conctl(s, &["delete", "kind", "hello", "--version", "1"], None).await;
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("409"), "{}", r.stderr);
    assert!(
        r.stderr.contains("1 resource of this version exists"),
        "{}",
        r.stderr
    );
    let r = conctl(s, &["delete", "kind", "hello"], None).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("add --version N"), "{}", r.stderr);

    let out = ok(s, &["delete", "resource", "hello/world"]).await;
    assert!(out.contains("hello/world: deletion requested"), "{out}");
    let r = conctl(s, &["get", "resource", "hello/world"], None).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("hello/world not found"), "{}", r.stderr);

    // A spec the kind refuses, from stdin: the problem's detail and each location, exit 1.
    let bad = r#"{"kind": "hello", "kind_version": 1, "name": "bad", "spec": {"greeting": 5}}"#;
    let r = conctl(s, &["apply", "-f", "-"], Some(bad)).await;
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("hello/bad"), "{}", r.stderr);
    assert!(r.stderr.contains("does not satisfy kind"), "{}", r.stderr);
    assert!(r.stderr.contains("422"), "{}", r.stderr);
    assert!(r.stderr.contains("\n  /spec/greeting: "), "{}", r.stderr);
    assert!(c.get("hello", "bad").await.is_none());

    // With its resource gone the kind version goes; then it is unknown.
    wait_for(T, "hello/world removed", || async {
        c.get("hello", "world").await.is_none().then_some(())
    })
    .await;
    let out = ok(s, &["delete", "kind", "hello", "--version", "1"]).await;
    assert!(out.contains("kind hello version 1: deleted"), "{out}");
    let r = conctl(
        s,
        &["delete", "kinds", "hello", "--kind-version", "1"],
        None,
    )
    .await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("404"), "{}", r.stderr);

    let _ = std::fs::remove_dir_all(&dir);
    c.stop().await;
}

/// `apply -f DIR` reads every .json/.yaml/.yml file under the directory (hidden ones and
/// other extensions skipped), applies manifests first, and sends resources in batches: 2,500
/// resources over three files take three requests, one invalid item fails alone.
#[tokio::test]
async fn apply_a_directory_in_batches() {
    let c = Converge::start(&[]).await;
    let dir = std::env::temp_dir().join(format!("conctl-dir-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(dir.join("more")).unwrap();
    let manifest = Converge::hello_manifest(30);
    // Resources sort first by path (a.json), the manifest last (z.json): manifests still go
    // first.
    std::fs::write(dir.join("z.json"), manifest.to_string()).unwrap();
    let hellos = |from: usize, to: usize| -> Value {
        Value::Array(
            (from..to)
                .map(|i| {
                    serde_json::json!({"kind": "hello", "kind_version": 1,
                                       "name": format!("d-{i:04}"), "spec": {"greeting": "hey"}})
                })
                .collect(),
        )
    };
    std::fs::write(dir.join("a.json"), hellos(0, 1200).to_string()).unwrap();
    let mut second = hellos(1200, 2000);
    second[7]["spec"]["greeting"] = 5.into();
    std::fs::write(dir.join("more/b.json"), second.to_string()).unwrap();
    let yaml: Vec<String> = hellos(2000, 2500)
        .as_array()
        .unwrap()
        .iter()
        .map(|v| serde_yaml::to_string(v).unwrap())
        .collect();
    std::fs::write(dir.join("more/c.yaml"), yaml.join("---\n")).unwrap();
    std::fs::write(dir.join(".hidden.json"), "not even json").unwrap();
    std::fs::write(dir.join("notes.txt"), "not a document").unwrap();

    let r = conctl(&c.http, &["apply", "-f", dir.to_str().unwrap()], None).await;
    assert_eq!(r.code, 1, "one item was refused: {}", r.stderr);
    assert!(
        r.stdout.starts_with("manifest/hello: created"),
        "{}{}",
        &r.stdout[..200.min(r.stdout.len())],
        r.stderr
    );
    assert_eq!(
        r.stdout.matches(": created").count(),
        1 + 2499,
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("hello/d-1207") && r.stderr.contains("/spec/greeting"),
        "{}",
        r.stderr
    );
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM resources WHERE kind = 'hello'")
        .fetch_one(&c.db.pool)
        .await
        .unwrap();
    assert_eq!(stored, 2499);
    let r = conctl(
        &c.http,
        &[
            "apply",
            "-f",
            dir.join("more").to_str().unwrap(),
            "-o",
            "json",
        ],
        None,
    )
    .await;
    let out: Value = serde_json::from_str(&r.stdout).expect("-o json prints one array");
    assert_eq!(out.as_array().unwrap().len(), 1299, "{}", r.stderr);
    assert!(
        out.as_array()
            .unwrap()
            .iter()
            .all(|v| v["result"] == "unchanged" && v.get("index").is_none())
    );
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let r = conctl(&c.http, &["apply", "-f", empty.to_str().unwrap()], None).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("holds no .json"), "{}", r.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    c.stop().await;
}

#[tokio::test]
async fn an_unreachable_server_is_named_in_the_error() {
    let server = format!("http://127.0.0.1:{}", free_port());
    let r = conctl(&server, &["list"], None).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("cannot connect"), "{}", r.stderr);
    assert!(r.stderr.contains(&server), "{}", r.stderr);

    let r = conctl(&server, &["get", "resource", "no-slash"], None).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("KIND/NAME"), "{}", r.stderr);
}

/// Starts converge with `env` (TLS among it), polling `/readyz` over HTTPS trusting `ca_pem`.
async fn start_tls(
    env: &[(&str, &str)],
    ca_pem: &str,
) -> (
    tokio::process::Child,
    converge_control::testing::TestDb,
    u16,
) {
    let db = converge_control::testing::TestDb::new().await;
    let (child, hp, _) =
        converge_control::testing::spawn_ready_tls("converge over TLS", ca_pem, |hp, gp| {
            common::serve_command(&db.url, hp, gp, env)
                .spawn()
                .expect("spawn converge")
        })
        .await;
    (child, db, hp)
}

const ADMIN: &str = "cvg_conctl-admin-token-0123456789";
const OPERATOR: &str = "cvg_conctl-operator-token-0123456789";
const VIEWER: &str = "cvg_conctl-viewer-token-0123456789";

#[tokio::test(flavor = "multi_thread")]
async fn https_with_tokens_from_flags_and_environment() {
    let dir = std::env::temp_dir().join(format!("conctl-tls-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = TestCa::new("conctl test CA");
    let (cert, key) = ca.server("conctl").write(&dir, "server");
    let ca_file = ca.write(&dir, "ca");
    let ca_file = ca_file.to_str().unwrap();
    let auth = dir.join("auth.yaml");
    let mut principals = String::from("principals:\n");
    for (name, role, tok) in [
        ("ops", "admin", ADMIN),
        ("ci", "operator", OPERATOR),
        ("alice", "viewer", VIEWER),
    ] {
        principals.push_str(&principal_line(name, role, tok, &[]));
    }
    std::fs::write(&auth, principals).unwrap();
    let env = [
        ("AUTH_FILE", auth.to_str().unwrap()),
        ("TLS_CERT_FILE", cert.to_str().unwrap()),
        ("TLS_KEY_FILE", key.to_str().unwrap()),
    ];
    let (mut child, _db, hp) = start_tls(&env, &ca.pem()).await;
    let s = format!("https://localhost:{hp}");
    let s = s.as_str();
    let ca_env = [("CONVERGE_CA_FILE", ca_file)];
    let file = dir.join("hello.yaml");
    std::fs::write(&file, hello_yaml()).unwrap();
    let file = file.to_str().unwrap();

    // No token: told how to pass one; apply stops at the first 401.
    let r = conctl_env(s, &ca_env, &["apply", "-f", file], None).await;
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("requires a token: pass --token or set CONVERGE_TOKEN"),
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stderr.matches("requires a token").count(),
        1,
        "{}",
        r.stderr
    );
    // An unknown token: refused, and never printed.
    let r = conctl_env(
        s,
        &[
            ("CONVERGE_CA_FILE", ca_file),
            ("CONVERGE_TOKEN", "cvg_not-a-known-token"),
        ],
        &["list"],
        None,
    )
    .await;
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("did not accept the token"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("not-a-known"), "{}", r.stderr);

    // The admin applies with --token and --ca-file flags.
    let r = conctl_env(
        s,
        &[],
        &["--ca-file", ca_file, "--token", ADMIN, "apply", "-f", file],
        None,
    )
    .await;
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("manifest/hello: created"), "{}", r.stdout);
    assert!(r.stdout.contains("hello/world: created"), "{}", r.stdout);

    // The viewer, both from the environment, reads, also at the IP the certificate names.
    let viewer = [("CONVERGE_CA_FILE", ca_file), ("CONVERGE_TOKEN", VIEWER)];
    for server in [s.to_string(), format!("https://127.0.0.1:{hp}")] {
        let r = conctl_env(&server, &viewer, &["list", "-o", "json"], None).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        let rows: Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(rows[0]["name"], "world", "{rows}");
    }
    let r = conctl_env(s, &viewer, &["get", "resource", "hello/world"], None).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("hello"), "{}", r.stdout);
    // ...but may not reconcile: the server's problem names the role needed.
    let r = conctl_env(s, &viewer, &["reconcile", "hello/world"], None).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("needs role operator"), "{}", r.stderr);
    assert!(r.stderr.contains("403"), "{}", r.stderr);
    assert!(!r.stderr.contains(VIEWER) && !r.stdout.contains(VIEWER));
    let r = conctl_env(
        s,
        &[("CONVERGE_CA_FILE", ca_file), ("CONVERGE_TOKEN", OPERATOR)],
        &["reconcile", "hello/world"],
        None,
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    // No worker runs here, so the first reconcile is still queued: either answer is a 2xx.
    assert!(
        r.stdout.starts_with("hello/world: ") && r.stdout.contains("reconcile"),
        "{}",
        r.stdout
    );

    // Without the CA the certificate is not trusted; http:// to the TLS port is named.
    let r = conctl_env(s, &[("CONVERGE_TOKEN", VIEWER)], &["list"], None).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("TLS handshake"), "{}", r.stderr);
    assert!(
        r.stderr.contains("--ca-file or CONVERGE_CA_FILE"),
        "{}",
        r.stderr
    );
    let plain = format!("http://127.0.0.1:{hp}");
    let r = conctl_env(&plain, &[("CONVERGE_TOKEN", VIEWER)], &["list"], None).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("use an https:// address"), "{}", r.stderr);
    // A CA file with a plain server is a mistake, caught before any request.
    let r = conctl_env(&plain, &ca_env, &["list"], None).await;
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("is for an https:// server"),
        "{}",
        r.stderr
    );

    let _ = child.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh temporary directory for one test's documents.
fn temp_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("conctl-{what}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `text` to `dir/name` (creating folders) and returns the path as text.
fn put(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// A file of examples/classic.
fn classic_file(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../examples/classic/{name}", manifest_dir())).unwrap()
}

/// `apply -f examples/classic/` applies every document there — six kind manifests, the
/// statussink provider config and reactor binding, the BOM — in dependency order whatever
/// their path order (the BOM sorts first, the binding before the config), and the binding
/// and config files need no `type` field. A typed document (a non-default config looks like
/// a resource) goes where its type says. Applying again changes nothing.
#[tokio::test]
async fn apply_a_directory_of_every_document_type_in_dependency_order() {
    let c = Converge::start(&[]).await;
    let s = c.http.as_str();
    let classic = format!("{}/../examples/classic/", manifest_dir());

    let out = ok(s, &["apply", "-f", &classic]).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 9, "{out}");
    for line in &lines[..6] {
        assert!(
            line.starts_with("manifest/") && line.ends_with(": created"),
            "{out}"
        );
    }
    assert_eq!(
        lines[6..],
        [
            "providerconfig/statussink-default: created",
            "reactor-binding/classicbom-synced-to-statussink: created",
            "classicbom/demo-bom: created",
        ]
    );
    let (st, binding) = c
        .call(
            reqwest::Method::GET,
            "reactor-bindings/classicbom-synced-to-statussink",
            None,
        )
        .await;
    assert_eq!(st, 200, "{binding}");
    assert_eq!(
        (
            &binding["watch_kind"],
            &binding["reactor"],
            &binding["enabled"]
        ),
        (&json!("classicbom"), &json!("statussink"), &json!(true))
    );
    let (st, config) = c
        .call(
            reqwest::Method::GET,
            "providerconfigs/statussink-default",
            None,
        )
        .await;
    assert_eq!(st, 200, "{config}");
    assert_eq!(config["is_default"], true);
    assert!(c.get("classicbom", "demo-bom").await.is_some());

    let out = ok(s, &["apply", "-f", &classic]).await;
    assert_eq!(out.matches(": unchanged").count(), 7, "{out}");
    assert_eq!(out.matches(": configured").count(), 2, "{out}");

    // A non-default config without a bundle has a resource's shape: its `type` says what it
    // is (and is not sent: the endpoint refuses unknown fields). Path order puts it last.
    let dir = temp_dir("typed");
    let file = put(
        &dir,
        "z-override.yaml",
        "type: providerconfig\nname: sink-override\nkind: statussink\nkind_version: 1\n\
         spec:\n  directory: /nonexistent/conctl-test\n",
    );
    let bom = put(&dir, "a-bom.json", &classic_file("bom.json"));
    let out = ok(s, &["apply", "-f", dir.to_str().unwrap(), "-o", "json"]).await;
    let answers: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(answers[0]["name"], "sink-override", "{answers}");
    assert_eq!(answers[0]["is_default"], false, "{answers}");
    assert_eq!(answers[1]["result"], "unchanged", "{answers}");
    let r = conctl(s, &["apply", "-f", &file, "--type", "resource"], None).await;
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("says type \"providerconfig\" but --type is \"resource\""),
        "{}",
        r.stderr
    );
    let _ = (bom, std::fs::remove_dir_all(&dir));
    c.stop().await;
}

/// Two documents naming one object (here the classic BOM as JSON and as YAML, in two files)
/// are refused before anything is applied, naming both files.
#[tokio::test]
async fn apply_refuses_two_documents_naming_one_object() {
    let c = Converge::start(&[]).await;
    let dir = temp_dir("dup");
    for kind in ["account", "vpc", "tgw", "route", "classicbom"] {
        put(
            &dir,
            &format!("manifests/{kind}.json"),
            &Converge::classic_manifest(kind).to_string(),
        );
    }
    let json_file = put(&dir, "bom.json", &classic_file("bom.json"));
    let bom: Value = serde_json::from_str(&classic_file("bom.json")).unwrap();
    let yaml_file = put(&dir, "bom.yaml", &serde_yaml::to_string(&bom).unwrap());

    for args in [
        vec!["apply", "-f", dir.to_str().unwrap()],
        vec!["sync", "-f", dir.to_str().unwrap(), "--prune", "-l", "a=b"],
    ] {
        let r = conctl(&c.http, &args, None).await;
        assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
        assert!(
            r.stderr.contains(&format!(
                "{json_file} and {yaml_file} both define classicbom/demo-bom"
            )),
            "{}",
            r.stderr
        );
        assert!(r.stderr.contains("nothing was applied"), "{}", r.stderr);
    }
    let (_, kinds) = c.call(reqwest::Method::GET, "kinds", None).await;
    assert_eq!(kinds["kinds"], json!([]), "nothing applied: {kinds}");
    let _ = std::fs::remove_dir_all(&dir);
    c.stop().await;
}

/// The hello resource `name` labelled `labels`, as YAML.
fn hello_doc(name: &str, labels: &[(&str, &str)], greeting: &str) -> String {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    serde_yaml::to_string(&json!({"kind": "hello", "kind_version": 1, "name": name,
                                  "labels": labels, "spec": {"greeting": greeting}}))
    .unwrap()
}

/// `sync --prune -l app=shop`: applies the directory, then deletes the labelled roots no
/// file defines any more; resources without the label (or with another value) are left
/// alone; `--plan` says what it would create, configure and delete and changes nothing;
/// `--prune` without a label is refused.
#[tokio::test(flavor = "multi_thread")]
async fn sync_prunes_the_labelled_roots_removed_from_the_directory() {
    let c = Converge::start(&[]).await;
    let _w = Worker::hello(&c.broker, "w1", &[]);
    let s = c.http.as_str();
    c.apply_manifest(&Converge::hello_manifest(30)).await;
    let dir = temp_dir("sync");
    let d = dir.to_str().unwrap();
    put(&dir, "kind.json", &Converge::hello_manifest(30).to_string());
    let shop = [("app", "shop")];
    let a = put(&dir, "a.yaml", &hello_doc("a", &shop, "hi"));
    let b = put(&dir, "b.yaml", &hello_doc("b", &shop, "hi"));
    // Outside the directory: unlabelled, and labelled for another app.
    let outside = temp_dir("outside");
    put(&outside, "x.yaml", &hello_doc("unlabelled", &[], "hi"));
    put(
        &outside,
        "y.yaml",
        &hello_doc("other", &[("app", "other")], "hi"),
    );
    ok(s, &["apply", "-f", outside.to_str().unwrap()]).await;

    let out = ok(s, &["sync", "-f", d, "--prune", "-l", "app=shop"]).await;
    assert!(
        out.contains("hello/a: created") && out.contains("hello/b: created"),
        "{out}"
    );
    assert!(!out.contains("pruned"), "{out}");
    for name in ["a", "b", "unlabelled", "other"] {
        c.wait_resource("hello", name, "Ready", T, |v| v["phase"] == "Ready")
            .await;
    }

    std::fs::remove_file(&b).unwrap();
    std::fs::write(&a, hello_doc("a", &shop, "hello again")).unwrap();
    let out = ok(s, &["sync", "-f", d, "--prune", "-l", "app=shop", "--plan"]).await;
    assert!(out.contains("manifest/hello: apply"), "{out}");
    assert!(out.contains("hello/a: configure"), "{out}");
    assert!(out.contains("hello/b: delete"), "{out}");
    assert!(
        out.contains("0 to create, 1 to configure, 0 unchanged, 1 other documents to apply, 1 to delete (nothing was changed)"),
        "{out}"
    );
    let plan: Value = serde_json::from_str(
        &ok(
            s,
            &[
                "sync", "-f", d, "--prune", "-l", "app:shop", "--plan", "-o", "json",
            ],
        )
        .await,
    )
    .unwrap();
    assert_eq!(
        plan["delete"],
        json!([{"kind": "hello", "name": "b"}]),
        "{plan}"
    );
    // The plan changed nothing.
    let b_now = c.get("hello", "b").await.expect("b is still there");
    assert_eq!(b_now["phase"], "Ready");
    assert_eq!(
        c.get("hello", "a").await.unwrap()["spec"]["greeting"],
        "hi",
        "the plan applied a"
    );

    // Without a label, prune would consider everything: refused before anything happens.
    let r = conctl(s, &["sync", "-f", d, "--prune"], None).await;
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("at least one -l KEY=VALUE"),
        "{}",
        r.stderr
    );
    assert!(c.get("hello", "b").await.is_some());

    let out = ok(s, &["sync", "-f", d, "--prune", "-l", "app=shop"]).await;
    assert!(out.contains("hello/a: configured"), "{out}");
    assert!(out.contains("hello/b: pruned"), "{out}");
    wait_for(T, "hello/b deleted", || async {
        c.get("hello", "b").await.is_none().then_some(())
    })
    .await;
    for name in ["a", "unlabelled", "other"] {
        assert!(c.get("hello", name).await.is_some(), "{name} was pruned");
    }
    // In sync again: nothing to prune, nothing changed.
    let out = ok(s, &["sync", "-f", d, "--prune", "-l", "app=shop"]).await;
    assert!(
        out.contains("hello/a: unchanged") && !out.contains("pruned"),
        "{out}"
    );
    let _ = (
        std::fs::remove_dir_all(&dir),
        std::fs::remove_dir_all(&outside),
    );
    c.stop().await;
}

/// The views against the classic BOM served by classic-worker: `get KIND/NAME`, `list
/// --owner`, status in tables (a terminal failure, the composite's ChildrenNotReady),
/// `events` (the newest N, one resource's, one kind's: exactly the log's newest), and
/// `history` with its diff, and `rollback`.
#[tokio::test(flavor = "multi_thread")]
async fn get_list_owner_events_and_history_of_the_classic_bom() {
    let c = Converge::start(&[]).await;
    let _w = Worker::spawn("classic-worker", &c.broker, "classic", &[]);
    let s = c.http.as_str();
    let dir = temp_dir("classic");
    for kind in ["account", "vpc", "tgw", "route", "classicbom"] {
        put(
            &dir,
            &format!("manifests/{kind}.json"),
            &Converge::classic_manifest(kind).to_string(),
        );
    }
    let bom_file = put(&dir, "bom.json", &classic_file("bom.json"));
    ok(s, &["apply", "-f", dir.to_str().unwrap()]).await;
    let out = ok(
        s,
        &[
            "wait",
            "classicbom/demo-bom",
            "--for=Ready",
            "--timeout=60s",
        ],
    )
    .await;
    assert_eq!(out, "classicbom/demo-bom is Ready\n");

    let out = ok(s, &["get", "classicbom/demo-bom"]).await;
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        [
            "KIND", "NAME", "PHASE", "READY", "GEN", "SYNCED", "AGE", "MESSAGE"
        ]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        row[..4],
        ["classicbom", "demo-bom", "Ready", "True"],
        "{out}"
    );
    let v: Value =
        serde_json::from_str(&ok(s, &["get", "classicbom/demo-bom", "-o", "json"]).await).unwrap();
    assert_eq!(v["status"]["ready"], 24, "{v}");

    let out = ok(s, &["list", "--owner", "classicbom/demo-bom"]).await;
    assert_eq!(out.lines().count(), 25, "{out}");
    assert_eq!(
        out.lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["KIND", "NAME", "PHASE", "READY", "GEN", "MESSAGE"]
    );
    let vpcs: Value = serde_json::from_str(
        &ok(
            s,
            &[
                "list",
                "--owner",
                "classicbom/demo-bom",
                "--kind",
                "vpc",
                "-o",
                "json",
            ],
        )
        .await,
    )
    .unwrap();
    assert_eq!(vpcs.as_array().unwrap().len(), 6, "{vpcs}");
    assert!(
        vpcs.as_array()
            .unwrap()
            .iter()
            .all(|v| v["owner"]["name"] == "demo-bom")
    );
    let r = conctl(s, &["list", "--owner", "classicbom/nope"], None).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("not found"), "{}", r.stderr);

    // A terminal failure shows in the child's row and the BOM's, with the reason.
    let mut failing = serde_json::from_str::<Value>(&classic_file("bom.json")).unwrap();
    failing["spec"]["fail"] = json!({"payments-beta-vpc": "terminal"});
    std::fs::write(&bom_file, failing.to_string()).unwrap();
    ok(s, &["apply", "-f", &bom_file]).await;
    c.wait_resource("classicbom", "demo-bom", "Degraded", T, |v| {
        v["phase"] == "Degraded"
    })
    .await;
    let out = ok(
        s,
        &[
            "list",
            "--owner",
            "classicbom/demo-bom",
            "--phase",
            "Failed",
        ],
    )
    .await;
    let row = out.lines().nth(1).expect("a failed row");
    assert!(
        row.starts_with("vpc") && row.contains("payments-beta-vpc"),
        "{out}"
    );
    assert!(
        row.contains("False") && row.contains("terminal: spec.fail asks for a terminal failure"),
        "{out}"
    );
    let out = ok(s, &["list"]).await;
    let row = out.lines().nth(1).unwrap();
    assert!(
        row.contains("Degraded") && row.contains("ChildrenNotReady: 23/24"),
        "{out}"
    );

    // Events: one resource's, and the log's newest N, exactly.
    let out = ok(s, &["events", "classicbom/demo-bom"]).await;
    assert_eq!(
        out.lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["AGE", "EVENT", "GEN", "ACTOR", "MESSAGE"]
    );
    assert!(out.contains("created -> Reconciling"), "{out}");
    assert!(out.contains("Reconciling -> Ready"), "{out}");
    assert!(out.contains("Reconciling -> Degraded"), "{out}");
    let newest = |kind: Option<&'static str>, n: i64| {
        let pool = c.db.pool.clone();
        async move {
            let mut ids: Vec<i64> = sqlx::query_scalar(
                "SELECT id FROM resource_events WHERE $1::text IS NULL OR kind = $1
                 ORDER BY id DESC LIMIT $2",
            )
            .bind(kind)
            .bind(n)
            .fetch_all(&pool)
            .await
            .unwrap();
            ids.reverse();
            ids
        }
    };
    let ids = |out: &str| -> Vec<i64> {
        let v: Value = serde_json::from_str(out).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_i64().unwrap())
            .collect()
    };
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM resource_events")
        .fetch_one(&c.db.pool)
        .await
        .unwrap();
    assert!(total > 50, "{total} events");
    for n in [1, 7, 50] {
        let out = ok(s, &["events", "--limit", &n.to_string(), "-o", "json"]).await;
        assert_eq!(ids(&out), newest(None, n).await, "--limit {n}");
    }
    let out = ok(
        s,
        &["events", "--kind", "vpc", "--limit", "3", "-o", "json"],
    )
    .await;
    assert_eq!(ids(&out), newest(Some("vpc"), 3).await);
    let out = ok(s, &["events", "--limit", "5"]).await;
    assert_eq!(out.lines().count(), 6, "{out}");
    assert!(out.starts_with("AGE   RESOURCE"), "{out}");

    // History: the two generations and what changed.
    let out = ok(s, &["history", "classicbom/demo-bom"]).await;
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["GEN", "AGE", "CHANGES"]);
    assert_eq!((rows[1][0], rows[1][2]), ("2", "+/fail"), "{out}");
    assert_eq!(rows[2][0], "1");
    assert!(out.contains("first recorded"), "{out}");
    let out = ok(s, &["history", "classicbom/demo-bom", "--diff"]).await;
    assert_eq!(
        out,
        "--- classicbom/demo-bom generation 1\n+++ classicbom/demo-bom generation 2\n\
         + /fail: {\"payments-beta-vpc\":\"terminal\"}\n"
    );
    let d: Value = serde_json::from_str(
        &ok(
            s,
            &[
                "history",
                "classicbom/demo-bom",
                "--diff",
                "2..1",
                "-o",
                "json",
            ],
        )
        .await,
    )
    .unwrap();
    assert_eq!(
        d["changes"],
        json!([{"op": "remove", "path": "/fail", "old": {"payments-beta-vpc": "terminal"}}])
    );
    let r = conctl(s, &["history", "classicbom/demo-bom", "--diff", "7"], None).await;
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("generation 7 of classicbom/demo-bom is not recorded"),
        "{}",
        r.stderr
    );

    // Rollback: generation 1's spec back as generation 3; again, nothing changes.
    let out = ok(s, &["rollback", "classicbom/demo-bom", "--to", "1"]).await;
    assert_eq!(
        out,
        "classicbom/demo-bom: generation 3 has the spec of generation 1\n"
    );
    let out = ok(s, &["history", "classicbom/demo-bom"]).await;
    let top: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!((top[0], top[2]), ("3", "-/fail"), "{out}");
    let out = ok(s, &["rollback", "classicbom/demo-bom", "--to", "1"]).await;
    assert!(out.contains("nothing changed"), "{out}");
    let r = conctl(s, &["rollback", "classicbom/demo-bom", "--to", "9"], None).await;
    assert_eq!(r.code, 1, "{}", r.stderr);

    let _ = std::fs::remove_dir_all(&dir);
    c.stop().await;
}

/// `conctl ... | head -1` ends conctl cleanly: status 0, no panic, no message, for a
/// table, a JSON document and the events table alike (each far larger than a pipe's
/// buffer, so conctl is still writing when head exits).
#[tokio::test]
async fn a_closed_stdout_ends_conctl_quietly() {
    let c = Converge::start(&[]).await;
    let dir = temp_dir("pipe");
    put(&dir, "kind.json", &Converge::hello_manifest(30).to_string());
    let many: Vec<Value> = (0..1500)
        .map(|i| {
            json!({"kind": "hello", "kind_version": 1, "name": format!("p-{i:04}"),
                         "labels": {"padding": "x".repeat(40)}, "spec": {}})
        })
        .collect();
    put(&dir, "many.json", &Value::Array(many).to_string());
    let r = conctl(&c.http, &["apply", "-f", dir.to_str().unwrap()], None).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bin = env!("CARGO_BIN_EXE_conctl");
    for args in [
        "list --all --limit 1500 -o json",
        "list --all --limit 1500",
        "events --limit 1000",
        "list manifests -o yaml",
    ] {
        let script = format!(
            "{{ '{bin}' --server '{}' {args}; echo \"conctl exited $?\" >&2; }} | head -1",
            c.http
        );
        let out = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args}: {stderr}");
        assert_eq!(stdout.lines().count(), 1, "{args}: {stdout}");
        assert_eq!(stderr, "conctl exited 0\n", "{args}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    c.stop().await;
}

/// `flaky`: the first attempt at each resource fails terminally; the next ones wait at
/// `gate` (one permit each), then succeed.
struct Flaky {
    runs: Arc<AtomicU32>,
    gate: Arc<tokio::sync::Semaphore>,
}

impl converge_sdk::Provider for Flaky {
    fn kind(&self) -> converge_sdk::KindVersion {
        converge_sdk::KindVersion::new("flaky", 1)
    }

    async fn work(
        &self,
        req: converge_sdk::ReactionRequest,
    ) -> Result<converge_sdk::Outcome, converge_sdk::HandlerError> {
        if self.runs.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(converge_sdk::HandlerError::terminal(
                "the first attempt fails",
            ));
        }
        self.gate
            .acquire()
            .await
            .expect("the gate stays open")
            .forget();
        Ok(converge_sdk::Outcome::status(
            json!({"attempt": req.attempt}),
        ))
    }
}

/// `conctl reconcile X && conctl wait X --for=Ready` on a resource that failed terminally:
/// the wait does not end on the old failure while the new attempt is queued or running
/// (that attempt is held until the wait has said it is waiting), and succeeds when it
/// recovers. Without a reconcile, the standing terminal failure ends the wait.
#[tokio::test(flavor = "multi_thread")]
async fn wait_after_reconcile_waits_for_the_new_attempt() {
    let c = Converge::start(&[]).await;
    let s = c.http.as_str();
    c.apply_manifest(&json!({
        "kind": "flaky", "kind_version": 1, "task_deadline_secs": 30,
        "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}],
    }))
    .await;
    let runs = Arc::new(AtomicU32::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let reg = converge_sdk::Registry::new().with(Flaky {
        runs: runs.clone(),
        gate: gate.clone(),
    });
    let mut cfg = converge_sdk::WorkerConfig::new(c.broker.clone());
    cfg.worker_name = "flaky".into();
    let worker = tokio::spawn(converge_sdk::run_worker(cfg, reg, std::future::pending()));
    let (st, _, body) = c
        .apply(&json!({"kind": "flaky", "kind_version": 1, "name": "x", "spec": {}}))
        .await;
    assert_eq!(st, 201, "{body}");
    c.wait_resource("flaky", "x", "terminally Failed", T, |v| {
        v["phase"] == "Failed" && v["failure_terminal"] == true
    })
    .await;

    // The standing terminal failure, with nothing queued, ends a wait.
    let r = conctl(
        s,
        &["wait", "flaky/x", "--for=Ready", "--timeout=20s"],
        None,
    )
    .await;
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("failed terminally at generation 1: the first attempt fails"),
        "{}",
        r.stderr
    );

    let out = ok(s, &["reconcile", "flaky/x"]).await;
    assert_eq!(out, "flaky/x: reconcile queued\n");
    let mut waiting = Command::new(env!("CARGO_BIN_EXE_conctl"))
        .env_clear()
        .args([
            "--server",
            s,
            "wait",
            "flaky/x",
            "--for=Ready",
            "--timeout=30s",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The wait says it keeps waiting on the Failed resource; the old code exited here.
    let mut stderr = BufReader::new(waiting.stderr.take().unwrap()).lines();
    let note = tokio::time::timeout(T, stderr.next_line())
        .await
        .expect("conctl wait said nothing")
        .unwrap()
        .unwrap_or_default();
    assert!(
        note.starts_with("flaky/x is Failed, retrying (attempt 2 ")
            && note.ends_with("): the first attempt fails; waiting for it to be Ready"),
        "{note}"
    );
    gate.add_permits(1);
    let out = tokio::time::timeout(T, waiting.wait_with_output())
        .await
        .expect("conctl wait returns")
        .unwrap();
    let rest = stderr.next_line().await.unwrap();
    assert!(
        out.status.success(),
        "{}{rest:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "flaky/x is Ready\n");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    worker.abort();
    c.stop().await;
}

/// A transiently failing resource: `wait` keeps waiting while it is retried and succeeds
/// when an attempt does; when its retries run out (`max_transient_attempts`, a Failed to
/// Failed change no event records), the wait ends with the failure, not at its timeout.
#[tokio::test(flavor = "multi_thread")]
async fn wait_rides_out_transient_retries_and_stops_when_they_run_out() {
    let c = Converge::start(&[]).await;
    let _w = Worker::hello(&c.broker, "w1", &[]);
    let s = c.http.as_str();
    let mut manifest = Converge::hello_manifest(30);
    manifest["max_transient_attempts"] = 3.into();
    c.apply_manifest(&manifest).await;
    let doc = |name: &str, spec: Value| {
        json!({"kind": "hello", "kind_version": 1, "name": name, "spec": spec}).to_string()
    };
    let r = conctl(
        s,
        &["apply", "-f", "-"],
        Some(&doc("recovers", json!({"fail_attempts": 2}))),
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = ok(
        s,
        &["wait", "hello/recovers", "--for=Ready", "--timeout=30s"],
    )
    .await;
    assert_eq!(out, "hello/recovers is Ready\n");
    assert_eq!(
        c.get("hello", "recovers").await.unwrap()["status"]["attempt"],
        3
    );

    let r = conctl(
        s,
        &["apply", "-f", "-"],
        Some(&doc("gives-up", json!({"fail": "transient"}))),
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = conctl(
        s,
        &["wait", "hello/gives-up", "--for=Ready", "--timeout=60s"],
        None,
    )
    .await;
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("hello/gives-up failed terminally at generation 1: spec.fail asks for a transient failure"),
        "{}",
        r.stderr
    );
    let v = c.get("hello", "gives-up").await.unwrap();
    assert_eq!(
        (v["failure_terminal"].clone(), v["failure_attempts"].clone()),
        (json!(true), json!(3))
    );
    c.stop().await;
}
