//! Tokens with a life cycle (issue 46), against the real `converge` binary and PostgreSQL:
//! an admin mints a token (shown once), it acts with its role (a viewer cannot write, a
//! worker only serves the kinds of its globs), the list never holds a secret or a hash, a
//! non-admin can neither mint, list nor revoke; a revoke on one pod is refused on a second
//! pod within a second and closes the token's open worker stream and SSE watch there; an
//! expired token is refused and its stream closed; uses are recorded without a write per
//! request; without `AUTH_FILE` the routes say so; and `conctl token new|list|revoke`
//! round-trips.

mod common;

use std::{path::PathBuf, time::Duration};

use common::{
    Converge, Peer,
    sse::{Chunks, open_watch},
    wait_for,
};
use converge_auth::{testing::principal_line, token};
use converge_proto::pb::{
    self, work_stream_client_msg::Body as Out, worker_service_client::WorkerServiceClient,
};
use converge_testkit::Api;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, transport::Channel};

const ADMIN: &str = "tok-admin-0123456789";
const OPERATOR: &str = "tok-operator-0123456789";
const VIEWER: &str = "tok-viewer-0123456789";
const T: Duration = Duration::from_secs(30);

/// A scratch directory with an AUTH_FILE (admin `ops`, operator `ci`, viewer `alice`),
/// removed on drop.
struct AuthDir(PathBuf);

impl AuthDir {
    fn new() -> AuthDir {
        let dir = converge_auth::testing::scratch_dir("tokens");
        let mut y = String::from("principals:\n");
        for (name, role, tok) in [
            ("ops", "admin", ADMIN),
            ("ci", "operator", OPERATOR),
            ("alice", "viewer", VIEWER),
        ] {
            y.push_str(&principal_line(name, role, tok, &[]));
        }
        std::fs::write(dir.join("auth.yaml"), y).unwrap();
        AuthDir(dir)
    }

    fn file(&self) -> String {
        self.0.join("auth.yaml").to_str().unwrap().to_string()
    }
}

impl Drop for AuthDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// converge with the AUTH_FILE, and the hello kind applied.
async fn start(dir: &AuthDir) -> Converge {
    let c = Converge::start(&[("AUTH_FILE", &dir.file())]).await;
    let (s, v) = c
        .call_as(
            Some(ADMIN),
            Method::PUT,
            "kinds/hello/manifest",
            Some(&Converge::hello_manifest(30)),
        )
        .await;
    assert!((200..300).contains(&s), "{s} {v}");
    c
}

/// Mints `body` as the admin; the answer must be 201.
async fn mint(api: &Api, body: Value) -> Value {
    let (s, v) = api
        .call_as(Some(ADMIN), Method::POST, "tokens", Some(&body))
        .await;
    assert_eq!(s, 201, "{v}");
    assert!(
        v["token"]
            .as_str()
            .unwrap()
            .starts_with(token::TOKEN_PREFIX)
    );
    v
}

/// A WorkStream subscribed to `kinds` (version 1) as `token`; the sender keeps it open.
type Stream = (
    mpsc::Sender<pb::WorkStreamClientMsg>,
    tonic::Streaming<pb::WorkStreamServerMsg>,
);

async fn open_stream(broker: &str, token: &str, kinds: &[&str]) -> Result<Stream, tonic::Status> {
    let channel = Channel::from_shared(broker.to_string())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(8);
    tx.send(pb::WorkStreamClientMsg {
        body: Some(Out::Subscribe(pb::Subscribe {
            kinds: kinds.iter().map(|k| k.to_string()).collect(),
            kind_versions: vec![1; kinds.len()],
            max_inflight: 4,
            worker_name: "raw".into(),
            sdk: "test/0".into(),
            ..Default::default()
        })),
    })
    .await
    .unwrap();
    let mut req = tonic::Request::new(ReceiverStream::new(rx));
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let rx = WorkerServiceClient::new(channel)
        .work_stream(req)
        .await?
        .into_inner();
    Ok((tx, rx))
}

/// Reads `s` until the broker ends it; the status it ended with.
async fn stream_end(s: &mut Stream) -> tonic::Status {
    tokio::time::timeout(T, async {
        loop {
            match s.1.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("the stream ended without a status"),
                Err(e) => return e,
            }
        }
    })
    .await
    .expect("the stream of a revoked or expired token must end")
}

async fn watch_end(s: &mut Chunks) {
    use futures::StreamExt;
    tokio::time::timeout(T, async { while let Some(Ok(_)) = s.next().await {} })
        .await
        .expect("the watch of a revoked token must end");
}

/// Polls `whoami` as `token` on `api` until it answers `status`.
async fn until_status(api: &Api, token: &str, status: u16, within: Duration, what: &str) {
    wait_for(within, what, || async {
        let (s, _) = api.call_as(Some(token), Method::GET, "whoami", None).await;
        (s == status).then_some(())
    })
    .await;
}

#[tokio::test]
async fn minted_tokens_act_with_their_role_and_list_no_secret() {
    let dir = AuthDir::new();
    let c = start(&dir).await;

    // Non-admins may neither mint, list nor revoke.
    let body = json!({"name": "v1", "role": "viewer"});
    for tok in [VIEWER, OPERATOR] {
        for (m, path, b) in [
            (Method::POST, "tokens", Some(&body)),
            (Method::GET, "tokens", None),
            (Method::DELETE, "tokens/v1", None),
        ] {
            let (s, v) = c.call_as(Some(tok), m.clone(), path, b).await;
            assert_eq!(s, 403, "{m} {path} as {tok}: {v}");
            assert!(v["detail"].as_str().unwrap().contains("admin"), "{v}");
        }
    }

    // Refusals: a name AUTH_FILE uses or a token has, bad role, kinds or expiry.
    let viewer = mint(&c, body.clone()).await;
    let secret = viewer["token"].as_str().unwrap().to_string();
    assert_eq!(
        (viewer["name"].as_str(), viewer["role"].as_str()),
        (Some("v1"), Some("viewer"))
    );
    for (b, want) in [
        (json!({"name": "v1", "role": "viewer"}), 409),
        (json!({"name": "ops", "role": "viewer"}), 409),
        (json!({"name": "x", "role": "root"}), 400),
        (json!({"name": "x", "role": "worker"}), 400),
        (json!({"name": "x", "role": "viewer", "kinds": ["*"]}), 400),
        (json!({"name": "x", "role": "viewer", "expires_in": 0}), 400),
        (
            json!({"name": "x", "role": "viewer", "expires_in": 40_000_000}),
            400,
        ),
        (json!({"name": "a b", "role": "viewer"}), 400),
    ] {
        let (s, v) = c
            .call_as(Some(ADMIN), Method::POST, "tokens", Some(&b))
            .await;
        assert_eq!(s, want, "{b}: {v}");
        assert!(v["detail"].is_string(), "a problem: {v}");
    }

    // The viewer reads, and may not write.
    let (s, v) = c.call_as(Some(&secret), Method::GET, "whoami", None).await;
    assert_eq!(
        (s, v["name"].as_str(), v["role"].as_str()),
        (200, Some("v1"), Some("viewer")),
        "{v}"
    );
    let res = json!({"kind": "hello", "kind_version": 1, "name": "r1", "spec": {}});
    let (s, _) = c
        .call_as(Some(&secret), Method::POST, "resources", Some(&res))
        .await;
    assert_eq!(s, 403);
    // An operator token writes, recorded as its name.
    let op = mint(
        &c,
        json!({"name": "deployer", "role": "operator", "expires_in": 3600}),
    )
    .await;
    assert!(op["expires_at"].is_string(), "{op}");
    let (s, v) = c
        .call_as(op["token"].as_str(), Method::POST, "resources", Some(&res))
        .await;
    assert_eq!(s, 201, "{v}");

    // A worker token serves the kinds of its globs only.
    let w = mint(
        &c,
        json!({"name": "hello-bot", "role": "worker", "kinds": ["hel*"]}),
    )
    .await;
    let wt = w["token"].as_str().unwrap();
    let e = open_stream(&c.broker, wt, &["net-a"])
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    open_stream(&c.broker, wt, &["hello"]).await.unwrap();
    let (s, _) = c.call_as(Some(wt), Method::GET, "whoami", None).await;
    assert_eq!(s, 403, "a worker token reads nothing on the API");

    // The list: every token, no secret, no hash.
    let (s, list) = c.call_as(Some(ADMIN), Method::GET, "tokens", None).await;
    assert_eq!(s, 200, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["deployer", "hello-bot", "v1"]);
    let text = list.to_string();
    for t in [secret.as_str(), op["token"].as_str().unwrap(), wt] {
        assert!(!text.contains(t), "the list holds a secret: {text}");
        assert!(
            !text.contains(&token::digest_hex(t)),
            "the list holds a hash: {text}"
        );
    }
    for item in list["items"].as_array().unwrap() {
        let keys: Vec<&String> = item.as_object().unwrap().keys().collect();
        assert!(
            !keys
                .iter()
                .any(|k| k.contains("token") || k.contains("sha")),
            "{item}"
        );
        assert_eq!(item["created_by"], "ops", "{item}");
    }

    // Revoked: refused (this pod re-reads at once), and gone from the list.
    let (s, _) = c
        .call_as(Some(ADMIN), Method::DELETE, "tokens/v1", None)
        .await;
    assert_eq!(s, 204);
    let (s, _) = c.call_as(Some(&secret), Method::GET, "whoami", None).await;
    assert_eq!(s, 401);
    let (s, _) = c
        .call_as(Some(ADMIN), Method::DELETE, "tokens/v1", None)
        .await;
    assert_eq!(s, 404);
    c.stop().await;
}

#[tokio::test]
async fn a_revoke_reaches_a_second_pod_within_a_second_and_closes_its_streams() {
    let dir = AuthDir::new();
    let c = start(&dir).await;
    let mut peer: Peer = c.spawn_peer(&[("AUTH_FILE", &dir.file())]).await;
    let b = Api::new(&peer.http);

    let viewer = mint(&c, json!({"name": "reader", "role": "viewer"})).await;
    let vt = viewer["token"].as_str().unwrap();
    let worker = mint(
        &c,
        json!({"name": "hello-bot", "role": "worker", "kinds": ["hello"]}),
    )
    .await;
    let wt = worker["token"].as_str().unwrap();
    // The mint reaches the second pod (its NOTIFY): both tokens work there.
    until_status(
        &b,
        vt,
        200,
        Duration::from_secs(5),
        "the minted token on the second pod",
    )
    .await;
    let mut stream = wait_for(
        Duration::from_secs(5),
        "a stream on the second pod",
        || async { open_stream(&peer.broker, wt, &["hello"]).await.ok() },
    )
    .await;
    let mut watch = open_watch(
        &reqwest::Client::new(),
        &format!("{}/api/v1/events?watch=true", peer.http),
        vt,
    )
    .await;

    let revoked = std::time::Instant::now();
    for name in ["reader", "hello-bot"] {
        let (s, v) = c
            .call_as(Some(ADMIN), Method::DELETE, &format!("tokens/{name}"), None)
            .await;
        assert_eq!(s, 204, "{v}");
    }
    // Every pod refuses it within a second of the revoke.
    until_status(
        &b,
        vt,
        401,
        Duration::from_secs(1),
        "the revoked token refused on the second pod",
    )
    .await;
    eprintln!(
        "the revoked token was refused on the second pod {:?} after the revoke calls began",
        revoked.elapsed()
    );
    let e = stream_end(&mut stream).await;
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    assert!(e.message().contains("hello-bot"), "{e:?}");
    watch_end(&mut watch).await;
    let e = open_stream(&peer.broker, wt, &["hello"])
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");

    // A name revoked and minted again is a new token: the old secret stays refused.
    let again = mint(&c, json!({"name": "reader", "role": "viewer"})).await;
    until_status(
        &b,
        again["token"].as_str().unwrap(),
        200,
        Duration::from_secs(5),
        "the re-minted token",
    )
    .await;
    let (s, _) = b.call_as(Some(vt), Method::GET, "whoami", None).await;
    assert_eq!(s, 401);
    converge_testkit::terminate(&mut peer.child, Duration::from_secs(15)).await;
    c.stop().await;
}

#[tokio::test]
async fn an_expired_token_is_refused_and_its_stream_closes() {
    let dir = AuthDir::new();
    let c = start(&dir).await;
    // Long enough to be used first on a loaded machine; the waits below are polls.
    let viewer = mint(
        &c,
        json!({"name": "brief", "role": "viewer", "expires_in": 5}),
    )
    .await;
    let vt = viewer["token"].as_str().unwrap();
    let worker = mint(
        &c,
        json!({"name": "brief-bot", "role": "worker", "kinds": ["hello"], "expires_in": 5}),
    )
    .await;
    let (s, _) = c.call_as(Some(vt), Method::GET, "whoami", None).await;
    assert_eq!(s, 200, "used before it expires");
    let mut stream = open_stream(&c.broker, worker["token"].as_str().unwrap(), &["hello"])
        .await
        .unwrap();

    until_status(&c, vt, 401, T, "the expired token refused").await;
    let e = stream_end(&mut stream).await;
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    let (_, list) = c.call_as(Some(ADMIN), Method::GET, "tokens", None).await;
    let brief = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "brief")
        .cloned()
        .unwrap();
    assert_eq!(brief["expired"], true, "{brief}");
    c.stop().await;
}

#[tokio::test]
async fn without_auth_file_the_tokens_routes_name_it() {
    let c = Converge::start(&[]).await;
    for (m, path, body) in [
        (
            Method::POST,
            "tokens",
            Some(json!({"name": "x", "role": "viewer"})),
        ),
        (Method::GET, "tokens", None),
        (Method::DELETE, "tokens/x", None),
    ] {
        let (s, v) = c.call(m.clone(), path, body).await;
        assert_eq!(s, 409, "{m} {path}: {v}");
        assert!(v["detail"].as_str().unwrap().contains("AUTH_FILE"), "{v}");
    }
    c.stop().await;
}

#[tokio::test]
async fn conctl_mints_lists_and_revokes() {
    let dir = AuthDir::new();
    let c = start(&dir).await;
    let conctl = |args: &'static [&'static str]| {
        let http = c.http.clone();
        async move {
            let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_conctl"))
                .env_clear()
                .env("CONVERGE_TOKEN", ADMIN)
                .arg("--server")
                .arg(&http)
                .args(args)
                .output()
                .await
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "conctl {args:?}: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            stdout
        }
    };
    let out = conctl(&[
        "token",
        "new",
        "ci-bot",
        "--role",
        "operator",
        "--expires-in",
        "30d",
    ])
    .await;
    assert!(out.contains("shown this once"), "{out}");
    let secret = out.lines().last().unwrap().trim().to_string();
    assert!(secret.starts_with(token::TOKEN_PREFIX), "{out}");
    let (s, v) = c.call_as(Some(&secret), Method::GET, "whoami", None).await;
    assert_eq!((s, v["name"].as_str()), (200, Some("ci-bot")), "{v}");

    let list = conctl(&["token", "list"]).await;
    assert!(
        list.starts_with("NAME") && list.contains("ci-bot") && list.contains("operator"),
        "{list}"
    );
    assert!(!list.contains(&secret), "{list}");
    conctl(&["token", "revoke", "ci-bot"]).await;
    let (s, _) = c.call_as(Some(&secret), Method::GET, "whoami", None).await;
    assert_eq!(s, 401);
    c.stop().await;
}

#[tokio::test]
async fn uses_are_recorded_off_the_request_path() {
    let dir = AuthDir::new();
    let c = start(&dir).await;
    let mut peer: Peer = c.spawn_peer(&[("AUTH_FILE", &dir.file())]).await;
    let b = Api::new(&peer.http);
    let t = mint(&c, json!({"name": "busy", "role": "viewer"})).await;
    let tok = t["token"].as_str().unwrap();
    assert!(t["last_used_at"].is_null(), "{t}");
    until_status(
        &b,
        tok,
        200,
        Duration::from_secs(5),
        "the minted token on the second pod",
    )
    .await;
    for _ in 0..50 {
        let (s, _) = b.call_as(Some(tok), Method::GET, "whoami", None).await;
        assert_eq!(s, 200);
    }
    let last_used = |list: &Value| {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == "busy")
            .unwrap()["last_used_at"]
            .clone()
    };
    // No request wrote it: uses are stamped in memory and written at most once a minute
    // (the second pod started seconds ago, so its first write is still far off).
    let (_, list) = c.call_as(Some(ADMIN), Method::GET, "tokens", None).await;
    assert!(last_used(&list).is_null(), "{list}");
    // A pod that stops writes what it saw, in one statement.
    converge_testkit::terminate(&mut peer.child, Duration::from_secs(15)).await;
    let (_, list) = c.call_as(Some(ADMIN), Method::GET, "tokens", None).await;
    let at = last_used(&list);
    let at =
        chrono::DateTime::parse_from_rfc3339(at.as_str().expect("last_used_at written")).unwrap();
    let created = chrono::DateTime::parse_from_rfc3339(t["created_at"].as_str().unwrap()).unwrap();
    assert!(
        at >= created - chrono::Duration::seconds(1),
        "{at} vs {created}"
    );
    c.stop().await;
}
