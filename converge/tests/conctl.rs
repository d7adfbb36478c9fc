//! `conctl` against a live `converge` with a real hello worker: apply a YAML file holding a
//! manifest and a resource, list, get (table, JSON, YAML), reconcile, delete, and the error
//! paths (a spec the kind refuses, an unreachable server); and against a converge serving
//! HTTPS with an AUTH_FILE: tokens and the CA from flags or the environment, the 401 and 403
//! messages, and the TLS mistakes named.

mod common;

use std::{process::Stdio, time::Duration};

use common::{Converge, Worker, free_port};
use converge_auth::{testing::TestCa, token};
use converge_control::testing::wait_for;
use serde_json::Value;
use tokio::{io::AsyncWriteExt, process::Command};

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
    for col in ["KIND", "NAME", "PHASE", "GEN", "SYNCED", "AGE"] {
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
        ["KIND", "NAME", "PHASE", "CHILDREN", "GEN"]
    );
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["hello", "world", "Ready", "0", "1"]
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
        principals.push_str(&format!(
            "  - {{name: {name}, role: {role}, token_sha256: \"{}\"}}\n",
            token::digest_hex(tok)
        ));
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
