//! Every door checks who is knocking (issue 23), against the real `converge` binary: the
//! HTTP role matrix with problem+json answers, the token file reloaded without a restart,
//! the WorkerService's UNAUTHENTICATED / PERMISSION_DENIED, the refusal to listen open
//! beyond loopback, HTTPS and gRPC over TLS with mTLS and a renewed certificate, and
//! PostgreSQL over TLS. And what a caller may do once inside (issue 41): a lease is its
//! stream's alone (results, heartbeats, pages, resumes), a caller without a credential is
//! refused before its message is read, a removed worker's stream closes as the token file
//! changes, and a removed viewer's open watches close.

mod common;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use common::{
    Converge, free_port,
    sse::{self, Chunks},
    wait_for,
};
use converge_auth::testing::{Pem, TestCa, https, principal_line};
use converge_control::testing::spawn_ready_tls;
use converge_proto::pb::{
    self, work_stream_client_msg::Body as Out, work_stream_server_msg::Body as In,
    worker_service_client::WorkerServiceClient,
};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, transport::Channel};

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        Scratch(converge_auth::testing::scratch_dir("sec"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One row of the HTTP matrix: (class, method, path, body, status per caller).
type Case<'a> = (&'a str, Method, &'a str, Option<&'a Value>, [u16; 6]);

/// One AUTH_FILE entry: (name, role, token, kinds).
type Entry<'a> = (&'a str, &'a str, &'a str, &'a [&'a str]);

fn write_auth(path: &Path, entries: &[Entry<'_>], spiffe: &[(&str, &str, &[&str])]) {
    let mut y = String::from("principals:\n");
    for (name, role, tok, kinds) in entries {
        y.push_str(&principal_line(name, role, tok, kinds));
    }
    for (name, id, kinds) in spiffe {
        y.push_str(&format!(
            "  - {{name: {name}, role: worker, spiffe_id: \"{id}\", kinds: {kinds:?}}}\n"
        ));
    }
    // Write then rename: a poll never sees half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, y).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

const ADMIN: &str = "tok-admin-0123456789";
const OPERATOR: &str = "tok-operator-0123456789";
const VIEWER: &str = "tok-viewer-0123456789";
const WORKER: &str = "tok-worker-0123456789";
const OTHER_WORKER: &str = "tok-other-worker-0123456789";

fn principals() -> Vec<Entry<'static>> {
    vec![
        ("ops", "admin", ADMIN, &[]),
        ("ci", "operator", OPERATOR, &[]),
        ("alice", "viewer", VIEWER, &[]),
        ("hello-w", "worker", WORKER, &["hel*"]),
        ("net-w", "worker", OTHER_WORKER, &["net-*"]),
    ]
}

async fn call(
    c: &Converge,
    token: Option<&str>,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> reqwest::Response {
    let mut r = c.client.request(method, format!("{}{path}", c.http));
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    if let Some(b) = body {
        r = r.json(b);
    }
    r.send().await.unwrap()
}

async fn start_with_auth(dir: &Scratch) -> (Converge, PathBuf) {
    let auth = dir.0.join("auth.yaml");
    write_auth(&auth, &principals(), &[]);
    let c = Converge::start(&[("AUTH_FILE", auth.to_str().unwrap())]).await;
    let r = call(
        &c,
        Some(ADMIN),
        Method::PUT,
        "/api/v1/kinds/hello/manifest",
        Some(&Converge::hello_manifest(30)),
    )
    .await;
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    (c, auth)
}

/// The actor of hello/`name`'s first event whose `field` is `value`.
async fn event_actor(c: &Converge, name: &str, field: &str, value: &str) -> Value {
    let path = format!("/api/v1/resources/hello/{name}/events");
    let events: Value = call(c, Some(VIEWER), Method::GET, &path, None)
        .await
        .json()
        .await
        .unwrap();
    events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e[field] == value)
        .unwrap_or_else(|| panic!("no event with {field} = {value}: {events}"))["actor"]
        .clone()
}

#[tokio::test]
async fn http_routes_answer_by_role_with_problem_json() {
    let dir = Scratch::new();
    let (c, _) = start_with_auth(&dir).await;
    let manifest = Converge::hello_manifest(30);
    let callers = [
        ("no token", None),
        ("bad token", Some("tok-nobody")),
        ("viewer", Some(VIEWER)),
        ("operator", Some(OPERATOR)),
        ("admin", Some(ADMIN)),
        ("worker", Some(WORKER)),
    ];
    // (class, method, path, body, expected status per caller above)
    let mut n = 0;
    for (who, tok) in callers {
        n += 1;
        let resource = json!({"kind": "hello", "kind_version": 1, "name": format!("m-{n}"), "spec": {"greeting": "hi"}});
        let cases: [Case<'_>; 5] = [
            (
                "read",
                Method::GET,
                "/api/v1/resources",
                None,
                [401, 401, 200, 200, 200, 403],
            ),
            (
                "read one",
                Method::GET,
                "/api/v1/kinds",
                None,
                [401, 401, 200, 200, 200, 403],
            ),
            (
                "operate",
                Method::POST,
                "/api/v1/resources",
                Some(&resource),
                [401, 401, 403, 201, 201, 403],
            ),
            // A plan shows what the caller could apply: the apply's role, nothing less.
            (
                "plan",
                Method::POST,
                "/api/v1/resources:plan",
                Some(&resource),
                [401, 401, 403, 200, 200, 403],
            ),
            (
                "admin",
                Method::PUT,
                "/api/v1/kinds/hello/manifest",
                Some(&manifest),
                [401, 401, 403, 403, 200, 403],
            ),
        ];
        let idx = n - 1;
        for (class, method, path, body, want) in cases {
            let r = call(&c, tok, method.clone(), path, body).await;
            let status = r.status().as_u16();
            let headers = r.headers().clone();
            let text = r.text().await.unwrap();
            assert_eq!(
                status, want[idx],
                "{class} {method} {path} as {who}: {text}"
            );
            if status == 401 || status == 403 {
                assert_eq!(
                    headers["content-type"], "application/problem+json",
                    "{class} as {who}"
                );
                let p: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(p["status"], status, "{text}");
            }
            if status == 401 {
                let www = headers["www-authenticate"].to_str().unwrap();
                assert!(www.starts_with("Bearer"), "{www}");
            }
            if status == 403 {
                let needed = match class {
                    "admin" => "needs role admin",
                    "operate" | "plan" => "needs role operator",
                    _ => "needs role viewer",
                };
                assert!(text.contains(needed), "{class} as {who}: {text}");
            }
        }
    }
    // An unknown /api/v1 path is behind the door too; probes, metrics and the UI are not.
    assert_eq!(
        call(&c, None, Method::GET, "/api/v1/nope", None)
            .await
            .status(),
        401
    );
    for open in ["/livez", "/healthz", "/readyz", "/metrics", "/"] {
        assert_eq!(
            call(&c, None, Method::GET, open, None).await.status(),
            200,
            "{open}"
        );
    }

    // The principal of a mutating call is the actor of the events it wrote.
    assert_eq!(event_actor(&c, "m-4", "type", "created").await, "ci");
    let r = call(
        &c,
        Some(ADMIN),
        Method::POST,
        "/api/v1/resources/hello/m-4/quarantine",
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        event_actor(&c, "m-4", "to_phase", "Quarantined").await,
        "ops"
    );
    c.stop().await;
}

#[tokio::test]
async fn the_token_file_is_reread_without_a_restart() {
    let dir = Scratch::new();
    let (c, auth) = start_with_auth(&dir).await;
    let late = "tok-late-0123456789";
    let get = |tok: &'static str| {
        let c = &c;
        async move {
            call(c, Some(tok), Method::GET, "/api/v1/resources", None)
                .await
                .status()
                .as_u16()
        }
    };
    assert_eq!(get(late).await, 401);
    let mut with_late = principals();
    with_late.push(("late", "viewer", late, &[]));
    write_auth(&auth, &with_late, &[]);
    wait_for(
        Duration::from_secs(10),
        "an added principal to be let in",
        || async { (get(late).await == 200).then_some(()) },
    )
    .await;
    // Removed (and VIEWER with it): both are out, the others unaffected.
    let kept: Vec<_> = principals()
        .into_iter()
        .filter(|p| p.0 != "alice")
        .collect();
    write_auth(&auth, &kept, &[]);
    wait_for(
        Duration::from_secs(10),
        "a removed principal to be refused",
        || async { (get(late).await == 401).then_some(()) },
    )
    .await;
    assert_eq!(get(VIEWER).await, 401);
    assert_eq!(get(ADMIN).await, 200);
    // A broken file keeps the last good list in force.
    std::fs::write(&auth, "principals: [{name: x, role: nobody}]").unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await; // two reload polls; no state to poll
    assert_eq!(get(ADMIN).await, 200);
    c.stop().await;
}

/// An open `?watch=true` stream of `path` (under the API) as `token`.
async fn open_watch(c: &Converge, token: &str, path: &str) -> Chunks {
    sse::open_watch(&c.client, &format!("{}{path}", c.http), token).await
}

/// Reads `s` until it ends (or fails); how long after `since` that was.
async fn until_closed(s: &mut Chunks, since: std::time::Instant) -> Duration {
    use futures::StreamExt;
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(_)) = s.next().await {}
    })
    .await
    .expect("the watch of a removed principal must end");
    since.elapsed()
}

#[tokio::test]
async fn a_removed_viewers_watches_close_and_others_go_on() {
    use futures::StreamExt;
    let dir = Scratch::new();
    let (c, auth) = start_with_auth(&dir).await;
    let apply = |name: &'static str| {
        let c = &c;
        async move {
            let body = json!({"kind": "hello", "kind_version": 1, "name": name, "spec": {}});
            let r = call(
                c,
                Some(OPERATOR),
                Method::POST,
                "/api/v1/resources",
                Some(&body),
            )
            .await;
            assert!(r.status().is_success(), "{}", r.text().await.unwrap());
        }
    };
    apply("watched-1").await;
    let mut one = open_watch(&c, VIEWER, "/api/v1/resources/hello/watched-1?watch=true").await;
    let mut log = open_watch(&c, VIEWER, "/api/v1/events?watch=true").await;
    let mut admin = open_watch(&c, ADMIN, "/api/v1/events?watch=true").await;
    // The resource's watch first sends the resource as it is: both are streaming.
    let first = tokio::time::timeout(Duration::from_secs(10), one.next())
        .await
        .expect("the first message")
        .expect("the stream is open")
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("watched-1"));

    let kept: Vec<_> = principals()
        .into_iter()
        .filter(|p| p.0 != "alice")
        .collect();
    write_auth(&auth, &kept, &[]);
    let removed = std::time::Instant::now();
    let (one_after, log_after) = tokio::join!(
        until_closed(&mut one, removed),
        until_closed(&mut log, removed)
    );
    // Within a second of converge reloading the file (polled once a second for now).
    println!(
        "a removed viewer's watches closed {one_after:?} (one resource) and {log_after:?} \
         (the event log) after the AUTH_FILE write"
    );
    let r = call(
        &c,
        Some(VIEWER),
        Method::GET,
        "/api/v1/events?watch=true",
        None,
    )
    .await;
    assert_eq!(r.status(), 401, "a reconnect is refused");

    // The admin's watch, opened beside them, goes on: a new resource's event reaches it.
    apply("watched-2").await;
    tokio::time::timeout(Duration::from_secs(10), async {
        let mut seen = String::new();
        while let Some(chunk) = admin.next().await {
            seen.push_str(&String::from_utf8_lossy(
                &chunk.expect("the admin's watch is open"),
            ));
            if seen.contains("watched-2") {
                return;
            }
        }
        panic!("the admin's watch ended: {seen}");
    })
    .await
    .expect("the admin's watch sees the next event");
    c.stop().await;
}

/// A raw WorkStream whose calls carry `token`; the sender keeps it open.
type Stream = (
    mpsc::Sender<pb::WorkStreamClientMsg>,
    tonic::Streaming<pb::WorkStreamServerMsg>,
);

async fn open_stream(
    channel: Channel,
    token: Option<&str>,
    kinds: &[&str],
) -> Result<Stream, tonic::Status> {
    open_subscribed(channel, token, subscribe(kinds)).await
}

/// A Subscribe for `kinds` (version 1 each).
fn subscribe(kinds: &[&str]) -> pb::Subscribe {
    pb::Subscribe {
        kinds: kinds.iter().map(|k| k.to_string()).collect(),
        kind_versions: vec![1; kinds.len()],
        max_inflight: 4,
        worker_name: "raw".into(),
        sdk: "test/0".into(),
        ..Default::default()
    }
}

/// [`open_stream`] with a Subscribe of the caller's making.
async fn open_subscribed(
    channel: Channel,
    token: Option<&str>,
    sub: pb::Subscribe,
) -> Result<Stream, tonic::Status> {
    let (tx, rx) = mpsc::channel(8);
    tx.send(pb::WorkStreamClientMsg {
        body: Some(Out::Subscribe(sub)),
    })
    .await
    .unwrap();
    let mut req = tonic::Request::new(ReceiverStream::new(rx));
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let rx = WorkerServiceClient::new(channel)
        .work_stream(req)
        .await?
        .into_inner();
    Ok((tx, rx))
}

async fn get_config(
    channel: Channel,
    token: Option<&str>,
    kind: &str,
) -> Result<(), tonic::Status> {
    let mut req = tonic::Request::new(pb::GetProviderConfigRequest {
        kinds: vec![kind.into()],
        kind_versions: vec![1],
    });
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    WorkerServiceClient::new(channel)
        .get_provider_config(req)
        .await
        .map(|_| ())
}

/// The next task on `s`, skipping config pushes.
async fn next_task(s: &mut Stream) -> pb::StageTask {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(20), s.1.message())
            .await
            .expect("no frame in time")
            .expect("stream failed")
            .expect("stream ended");
        if let Some(In::Task(t)) = msg.body {
            return t;
        }
    }
}

#[tokio::test]
async fn worker_service_checks_tokens_roles_and_kinds() {
    let dir = Scratch::new();
    let (c, auth) = start_with_auth(&dir).await;
    let r = call(
        &c,
        Some(OPERATOR),
        Method::POST,
        "/api/v1/resources",
        Some(&json!({"kind": "hello", "kind_version": 1, "name": "w1", "spec": {}})),
    )
    .await;
    assert_eq!(r.status(), 201);
    let channel = Channel::from_shared(c.broker.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();

    let denied = |r: Result<_, tonic::Status>| r.map(|_| ()).unwrap_err();
    let e = denied(open_stream(channel.clone(), None, &["hello"]).await);
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    let e = denied(open_stream(channel.clone(), Some("tok-nobody"), &["hello"]).await);
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    let e = denied(open_stream(channel.clone(), Some(VIEWER), &["hello"]).await);
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("role worker"), "{e:?}");
    let e = denied(open_stream(channel.clone(), Some(OTHER_WORKER), &["net-a", "hello"]).await);
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("\"hello\""), "names the kind: {e:?}");

    let e = get_config(channel.clone(), Some(OTHER_WORKER), "hello")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("\"hello\""), "{e:?}");
    let e = get_config(channel.clone(), None, "hello")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    get_config(channel.clone(), Some(WORKER), "hello")
        .await
        .unwrap();

    // Nobody refused above was handed the task: it is still unclaimed.
    let r = call(
        &c,
        Some(VIEWER),
        Method::GET,
        "/api/v1/resources/hello/w1",
        None,
    )
    .await;
    let detail: Value = r.json().await.unwrap();
    assert_ne!(detail["work"]["claimed"], true, "{detail}");
    assert_eq!(detail["phase"], "Reconciling", "{detail}");

    // The right worker gets it.
    let mut s = open_stream(channel.clone(), Some(WORKER), &["hello"])
        .await
        .unwrap();
    let t = next_task(&mut s).await;
    assert_eq!(t.kind, "hello");

    // Removed from AUTH_FILE, its open stream is closed.
    let kept: Vec<_> = principals()
        .into_iter()
        .filter(|p| p.0 != "hello-w")
        .collect();
    write_auth(&auth, &kept, &[]);
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match s.1.message().await {
                Ok(Some(_)) => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("the stream of a removed principal must end");
    let e = end.map(|_| ()).unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    assert!(e.message().contains("hello-w"), "{e:?}");
    c.stop().await;
}

#[tokio::test]
async fn serve_refuses_to_listen_open_beyond_loopback() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_converge"))
        .arg("serve")
        .env_clear()
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .env("LISTEN_ADDR", format!("0.0.0.0:{}", free_port()))
        .env("BROKER_LISTEN_ADDR", format!("127.0.0.1:{}", free_port()))
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("AUTH_FILE") && err.contains("AUTH=none"),
        "{err}"
    );
    assert!(err.contains("LISTEN_ADDR=0.0.0.0"), "{err}");
}

/// Starts converge over TLS; `/readyz` is polled over HTTPS.
async fn start_tls(
    env: &[(&str, &str)],
    ca_pem: &str,
) -> (
    tokio::process::Child,
    converge_control::testing::TestDb,
    u16,
    u16,
) {
    let db = converge_control::testing::TestDb::new().await;
    let (child, hp, gp) = spawn_ready_tls("converge over TLS", ca_pem, |hp, gp| {
        common::serve_command(&db.url, hp, gp, env).spawn().unwrap()
    })
    .await;
    (child, db, hp, gp)
}

async fn tls_channel(
    gp: u16,
    ca: &str,
    identity: Option<&Pem>,
) -> Result<Channel, tonic::transport::Error> {
    let mut tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(ca))
        .domain_name("localhost");
    if let Some(id) = identity {
        tls = tls.identity(tonic::transport::Identity::from_pem(&id.cert, &id.key));
    }
    Channel::from_shared(format!("https://127.0.0.1:{gp}"))
        .unwrap()
        .tls_config(tls)?
        .connect()
        .await
}

#[tokio::test]
async fn https_and_grpc_over_tls_with_mtls_and_a_renewed_certificate() {
    let dir = Scratch::new();
    let server_ca = TestCa::new("converge test server CA");
    let client_ca = TestCa::new("converge test client CA");
    let (cert, key) = server_ca.server("v1").write(&dir.0, "server");
    let client_ca_file = client_ca.write(&dir.0, "clients");
    let auth = dir.0.join("auth.yaml");
    let spiffe = "spiffe://example.org/worker/a";
    write_auth(&auth, &principals(), &[("mtls-w", spiffe, &["hello"])]);
    let env = [
        ("AUTH_FILE", auth.to_str().unwrap()),
        ("TLS_CERT_FILE", cert.to_str().unwrap()),
        ("TLS_KEY_FILE", key.to_str().unwrap()),
        ("TLS_CLIENT_CA_FILE", client_ca_file.to_str().unwrap()),
    ];
    let ca = server_ca.pem();
    let (_child, _db, hp, gp) = start_tls(&env, &ca).await;

    // HTTPS: the API behind tokens, the served certificate the one on disk.
    let r = https(hp, &ca, "GET", "/api/v1/resources", None, None)
        .await
        .unwrap();
    assert_eq!(r.status, 401);
    assert_eq!(r.server_cn, "v1");
    // Over TLS, every answer (a refusal, the UI) tells browsers to stay on HTTPS.
    let ui = https(hp, &ca, "GET", "/", None, None).await.unwrap();
    for reply in [&r, &ui] {
        assert_eq!(
            reply.headers["strict-transport-security"], "max-age=31536000",
            "{reply:?}"
        );
        assert!(reply.headers.contains_key("content-security-policy"));
    }
    let manifest = Converge::hello_manifest(30).to_string();
    let r = https(
        hp,
        &ca,
        "PUT",
        "/api/v1/kinds/hello/manifest",
        Some(ADMIN),
        Some(&manifest),
    )
    .await
    .unwrap();
    assert!(r.status < 300, "{r:?}");
    let body =
        json!({"kind": "hello", "kind_version": 1, "name": "over-tls", "spec": {}}).to_string();
    let r = https(
        hp,
        &ca,
        "POST",
        "/api/v1/resources",
        Some(OPERATOR),
        Some(&body),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    // Plain HTTP on the TLS port gets nowhere.
    assert!(
        reqwest::get(format!("http://127.0.0.1:{hp}/readyz"))
            .await
            .is_err(),
        "plaintext must not be served"
    );

    // gRPC with a client certificate whose SPIFFE ID is a worker principal: a task arrives.
    let id = client_ca.client(spiffe);
    let ch = tls_channel(gp, &ca, Some(&id)).await.unwrap();
    let mut s = open_stream(ch, None, &["hello"]).await.unwrap();
    assert_eq!(next_task(&mut s).await.kind, "hello");

    // A certificate from another CA, or none at all, does not get through the handshake.
    let stranger = TestCa::new("someone else").client(spiffe);
    for (what, ident) in [("foreign CA", Some(&stranger)), ("no certificate", None)] {
        let refused = match tls_channel(gp, &ca, ident).await {
            Err(_) => true,
            Ok(ch) => open_stream(ch, Some(WORKER), &["hello"]).await.is_err(),
        };
        assert!(refused, "{what} must be refused");
    }
    // A valid certificate whose SPIFFE ID nobody holds is UNAUTHENTICATED.
    let unknown = client_ca.client("spiffe://example.org/worker/unknown");
    let ch = tls_channel(gp, &ca, Some(&unknown)).await.unwrap();
    let e = open_stream(ch, None, &["hello"])
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");

    // A renewed certificate is served to new connections without a restart.
    server_ca.server("v2").write(&dir.0, "server");
    wait_for(Duration::from_secs(10), "the renewed certificate", || {
        let ca = ca.clone();
        async move {
            let r = https(hp, &ca, "GET", "/livez", None, None).await.ok()?;
            (r.server_cn == "v2").then_some(())
        }
    })
    .await;
    let ch = tls_channel(gp, &ca, Some(&id)).await.unwrap();
    get_config(ch, None, "hello").await.unwrap();
}

#[tokio::test]
async fn postgres_over_tls_with_verify_full() {
    use converge_control::devdb::{DevDb, DevDbConfig};
    use sqlx::Connection;

    let dir = Scratch::new();
    let data_dir = dir.0.join("pg");
    let tls_dir = data_dir.join("tls");
    std::fs::create_dir_all(&tls_dir).unwrap();
    let ca = TestCa::new("converge test PostgreSQL CA");
    // Inside the data dir: DevDb hands it to the server's user, and PostgreSQL insists its
    // key belongs to that user with mode 0600.
    let (cert, key) = ca.server("postgres").write(&tls_dir, "server");
    let ca_file = ca.write(&dir.0, "ca");
    let db = DevDb::start(DevDbConfig {
        data_dir,
        port: None,
        settings: vec![
            "ssl=on".into(),
            format!("ssl_cert_file={}", cert.display()),
            format!("ssl_key_file={}", key.display()),
        ],
    })
    .await
    .expect("start PostgreSQL with ssl=on");
    let url = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        db.url(),
        ca_file.display()
    );

    let mut conn = sqlx::PgConnection::connect(&url)
        .await
        .expect("connect over TLS");
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert!(ssl, "the connection is encrypted");
    // verify-full refuses a server it cannot verify.
    let wrong_ca = TestCa::new("not the server's").write(&dir.0, "wrong");
    let bad = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        db.url(),
        wrong_ca.display()
    );
    assert!(sqlx::PgConnection::connect(&bad).await.is_err());

    // converge itself runs on such a URL, every one of its connections encrypted.
    let (hp, gp) = (free_port(), free_port());
    let mut child = common::serve_command(&url, hp, gp, &[]).spawn().unwrap();
    wait_for(
        Duration::from_secs(30),
        "converge on PostgreSQL over TLS",
        || async {
            reqwest::get(format!("http://127.0.0.1:{hp}/readyz"))
                .await
                .ok()
                .filter(|r| r.status() == 200)
                .map(|_| ())
        },
    )
    .await;
    let (plain, encrypted): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE NOT s.ssl), count(*) FILTER (WHERE s.ssl)
         FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
         WHERE a.backend_type = 'client backend' AND a.datname = current_database()",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(plain, 0);
    assert!(
        encrypted >= 2,
        "converge's pool plus this connection: {encrypted}"
    );
    child.kill().await.unwrap();
    conn.close().await.unwrap();
    db.stop().await.unwrap();
}

/// A connection to `broker`, from `local` when given (another loopback address stands for
/// another host).
async fn connect(broker: &str, local: Option<&str>) -> Channel {
    tonic::transport::Endpoint::from_shared(broker.to_owned())
        .unwrap()
        .local_address(local.map(|a| a.parse().unwrap()))
        .connect()
        .await
        .unwrap()
}

async fn send(s: &Stream, body: Out) {
    s.0.send(pb::WorkStreamClientMsg { body: Some(body) })
        .await
        .unwrap();
}

/// The next ack on `s`, skipping config pushes.
async fn next_ack(s: &mut Stream) -> pb::CompleteAck {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(20), s.1.message())
            .await
            .expect("no frame in time")
            .expect("stream failed")
            .expect("stream ended");
        match msg.body {
            Some(In::Ack(a)) => return a,
            Some(In::Config(_)) => continue,
            other => panic!("expected an ack, got {other:?}"),
        }
    }
}

fn complete(t: &pb::StageTask, status: Value) -> Out {
    Out::Complete(pb::StageComplete {
        lease_token: t.lease_token.clone(),
        stage: t.stage,
        claim_epoch: t.claim_epoch,
        status: serde_json::to_vec(&status).unwrap(),
        ..Default::default()
    })
}

fn heartbeat(t: &pb::StageTask) -> Out {
    Out::Heartbeat(pb::WorkHeartbeat {
        lease_token: vec![t.lease_token.clone()],
        claim_epoch: vec![t.claim_epoch],
    })
}

/// One ListDescendants page of `t`'s resource with `t`'s lease, as `token` calls it.
async fn page(
    channel: Channel,
    token: &str,
    t: &pb::StageTask,
) -> Result<pb::ListDescendantsResponse, tonic::Status> {
    let mut req = tonic::Request::new(pb::ListDescendantsRequest {
        resource_id: t.resource_id.clone(),
        lease_token: t.lease_token.clone(),
        claim_epoch: t.claim_epoch,
        ..Default::default()
    });
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    WorkerServiceClient::new(channel)
        .list_descendants(req)
        .await
        .map(tonic::Response::into_inner)
}

/// The value of `converge_broker_lease_refusals_total{frame,why}` in `/metrics` at `http`.
async fn refusals(http: &str, frame: &str, why: &str) -> f64 {
    let text = reqwest::get(format!("{http}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series = format!(r#"converge_broker_lease_refusals_total{{frame="{frame}",why="{why}"}}"#);
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str())?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{series} is not exported"))
}

const HELLO_WORKER_2: &str = "tok-hello-worker-2-0123456789";

#[tokio::test]
async fn a_lease_belongs_to_the_stream_that_holds_it() {
    let dir = Scratch::new();
    let auth = dir.0.join("auth.yaml");
    // A second principal that may serve hello too: its streams are another worker's.
    let mut entries = principals();
    entries.push(("hello-w2", "worker", HELLO_WORKER_2, &["hello"]));
    write_auth(&auth, &entries, &[]);
    let env = [("AUTH_FILE", auth.to_str().unwrap())];
    let c = Converge::start(&env).await;
    // Another broker on the same database: to it the lease is one it did not hand out.
    let peer = c.spawn_peer(&env).await;
    let r = call(
        &c,
        Some(ADMIN),
        Method::PUT,
        "/api/v1/kinds/hello/manifest",
        Some(&Converge::hello_manifest_any_status(30)),
    )
    .await;
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let r = call(
        &c,
        Some(OPERATOR),
        Method::POST,
        "/api/v1/resources",
        Some(&json!({"kind": "hello", "kind_version": 1, "name": "held", "spec": {}})),
    )
    .await;
    assert_eq!(r.status(), 201);

    let home = connect(&c.broker, None).await;
    let mut holder = open_stream(home.clone(), Some(WORKER), &["hello"])
        .await
        .unwrap();
    let t = next_task(&mut holder).await;
    let work = || async {
        let r = call(
            &c,
            Some(VIEWER),
            Method::GET,
            "/api/v1/resources/hello/held",
            None,
        )
        .await;
        r.json::<Value>().await.unwrap()
    };
    let claimed = work().await;
    assert_eq!(claimed["work"]["claimed"], true, "{claimed}");

    // A second stream of the same principal (another connection) and a stream of another
    // principal allowed the same kind: each heartbeats the lease, then completes it.
    let mut same = open_stream(connect(&c.broker, None).await, Some(WORKER), &["hello"])
        .await
        .unwrap();
    let mut other = open_stream(
        connect(&c.broker, None).await,
        Some(HELLO_WORKER_2),
        &["hello"],
    )
    .await
    .unwrap();
    for s in [&mut same, &mut other] {
        send(s, heartbeat(&t)).await;
        send(s, complete(&t, json!({"stolen": true}))).await;
        let ack = next_ack(s).await;
        assert_eq!(
            (ack.lease_token.as_str(), ack.accepted),
            (t.lease_token.as_str(), false)
        );
    }
    // The other principal cannot take the lease over by resuming it either.
    let mut resumed = subscribe(&["hello"]);
    resumed.resumed = vec![pb::ResumedTask {
        lease_token: t.lease_token.clone(),
        claim_epoch: t.claim_epoch,
    }];
    let _thief = open_subscribed(
        connect(&c.broker, None).await,
        Some(HELLO_WORKER_2),
        resumed.clone(),
    )
    .await
    .unwrap();
    // Paging with it: refused to the other principal, and to the same principal calling
    // from another host; the holder pages.
    let e = page(connect(&c.broker, None).await, HELLO_WORKER_2, &t)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let e = page(connect(&c.broker, Some("127.0.0.2")).await, WORKER, &t)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let own = page(home.clone(), WORKER, &t).await.unwrap();
    assert!(own.descendants.is_empty(), "{own:?}");

    // To another broker the lease is unknown: a result and a resume from a principal that
    // may not serve hello are refused there.
    let mut far = open_stream(
        connect(&peer.broker, None).await,
        Some(OTHER_WORKER),
        &["net-a"],
    )
    .await
    .unwrap();
    send(&far, complete(&t, json!({"stolen": "elsewhere"}))).await;
    assert!(!next_ack(&mut far).await.accepted);
    resumed.kinds = vec!["net-a".into()];
    let _far_thief = open_subscribed(
        connect(&peer.broker, None).await,
        Some(OTHER_WORKER),
        resumed,
    )
    .await
    .unwrap();

    // Each refusal is counted; the resume is refused in its session, after the Subscribe
    // was answered.
    wait_for(Duration::from_secs(10), "the refusals counted", || async {
        let got = [
            refusals(&c.http, "complete", "other_stream").await,
            refusals(&c.http, "heartbeat", "other_stream").await,
            refusals(&c.http, "list_descendants", "other_stream").await,
            refusals(&c.http, "resume", "other_stream").await,
            refusals(&peer.http, "complete", "kind").await,
            refusals(&peer.http, "resume", "kind").await,
        ];
        (got == [2.0, 2.0, 2.0, 1.0, 1.0, 1.0]).then_some(())
    })
    .await;

    // Nothing changed: still claimed, no status, the heartbeat not refreshed by strangers.
    let now = work().await;
    assert_eq!(now["phase"], "Reconciling", "{now}");
    assert!(now["status"].is_null(), "{now}");
    assert_eq!(now["work"]["claimed"], true, "{now}");
    assert_eq!(now["work"]["heartbeat_at"], claimed["work"]["heartbeat_at"]);

    // The holder's own result is accepted.
    send(&holder, complete(&t, json!({"by": "holder"}))).await;
    assert!(next_ack(&mut holder).await.accepted);
    let r = wait_for(Duration::from_secs(10), "held Ready", || async {
        let v = work().await;
        (v["phase"] == "Ready").then_some(v)
    })
    .await;
    assert_eq!(r["status"], json!({"by": "holder"}));
    c.stop().await;
}

/// `name`'s value in kB in `/proc/<pid>/status`, as bytes.
fn proc_status_bytes(pid: u32, name: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"));
    kb * 1024
}

#[tokio::test]
async fn unauthenticated_calls_are_refused_before_their_message_is_read() {
    const CALLS: usize = 16;
    const SIZE: usize = 60 << 20;
    let dir = Scratch::new();
    let (c, _) = start_with_auth(&dir).await;
    let pid = c.pid();
    let rss_before = proc_status_bytes(pid, "VmRSS");
    let calls = (0..CALLS).map(|_| {
        let broker = c.broker.clone();
        async move {
            let mut client = WorkerServiceClient::new(connect(&broker, None).await)
                .max_encoding_message_size(usize::MAX);
            client
                .get_provider_config(pb::GetProviderConfigRequest {
                    kinds: vec!["k".repeat(SIZE)],
                    kind_versions: vec![1],
                })
                .await
        }
    });
    for r in futures::future::join_all(calls).await {
        let e = r.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    }
    let peak = proc_status_bytes(pid, "VmHWM");
    let grew = peak.saturating_sub(rss_before);
    eprintln!(
        "{CALLS} concurrent unauthenticated {} MiB calls: converge VmRSS {} MiB before, VmHWM {} MiB after (+{} MiB)",
        SIZE >> 20,
        rss_before >> 20,
        peak >> 20,
        grew >> 20
    );
    assert!(
        grew <= 150 << 20,
        "converge grew {} MiB for calls it refused",
        grew >> 20
    );
    // The door still opens for a worker with a token.
    get_config(connect(&c.broker, None).await, Some(WORKER), "hello")
        .await
        .unwrap();
    c.stop().await;
}

#[tokio::test]
async fn a_removed_workers_stream_closes_when_the_token_file_changes() {
    let dir = Scratch::new();
    let (c, auth) = start_with_auth(&dir).await;
    let mut s = open_stream(connect(&c.broker, None).await, Some(WORKER), &["hello"])
        .await
        .unwrap();
    // The stream is registered once its response came: the removal below is a revocation.
    let kept: Vec<_> = principals()
        .into_iter()
        .filter(|p| p.0 != "hello-w")
        .collect();
    let written = std::time::Instant::now();
    write_auth(&auth, &kept, &[]);
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match s.1.message().await {
                Ok(Some(_)) => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("the stream of a removed principal must end");
    let took = written.elapsed();
    let e = end.map(|_| ()).unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    assert!(e.message().contains("hello-w"), "{e:?}");
    eprintln!("a removed worker's stream closed {took:?} after the AUTH_FILE rename");
    c.stop().await;
}
