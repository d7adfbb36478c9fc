//! `conctl` against a live `converge` with a real hello worker: apply a YAML file holding a
//! manifest and a resource, list, get (table, JSON, YAML), reconcile, delete, and the error
//! paths (a spec the kind refuses, an unreachable server).

mod common;

use std::{process::Stdio, time::Duration};

use common::{Converge, Worker, free_port};
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
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_conctl"));
    cmd.env_clear()
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
