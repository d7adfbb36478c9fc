//! Wire compatibility of the real `converge` binary's gRPC listener: gzip-compressing
//! clients (a raw one, and the Rust SDK's) are served and plain ones still are, a compose
//! result of about 300 MB is refused with a status naming `GRPC_MAX_MESSAGE_BYTES` at the
//! default limit and crosses the transport when the limit is raised, and server reflection
//! lists the WorkerService and `grpc.health.v1.Health` over both reflection protocols.

mod common;

use std::time::Duration;

use common::{Converge, Worker, raw_worker::RawWorker};
use converge_proto::pb::{
    self, work_stream_client_msg::Body as Out, worker_service_client::WorkerServiceClient,
};
use serde_json::{Value, json};
use tonic::{Code, codec::CompressionEncoding::Gzip, transport::Channel};

const T: Duration = Duration::from_secs(60);

fn subscribe(kind: &str) -> Out {
    Out::Subscribe(pb::Subscribe {
        kinds: vec![kind.into()],
        kind_versions: vec![1],
        max_inflight: 4,
        worker_name: "wire".into(),
        sdk: "test/0".into(),
        ..Default::default()
    })
}

fn done(t: &pb::StageTask, status: Value) -> Out {
    Out::Complete(pb::StageComplete {
        lease_token: t.lease_token.clone(),
        stage: t.stage,
        claim_epoch: t.claim_epoch,
        status: serde_json::to_vec(&status).unwrap(),
        ..Default::default()
    })
}

/// A client that compresses what it sends with gzip and accepts gzip back, as the original
/// implementation's workers did.
fn gzip(c: WorkerServiceClient<Channel>) -> WorkerServiceClient<Channel> {
    c.send_compressed(Gzip).accept_compressed(Gzip)
}

/// Runs one hello task on `w` to Ready.
async fn complete_one(c: &Converge, w: &mut RawWorker, name: &str) {
    let (status, _, body) = c
        .apply(
            &json!({"kind": "hello", "kind_version": 1, "name": name, "spec": {"greeting": name}}),
        )
        .await;
    assert!(status < 300, "apply {name}: {status} {body}");
    let t = w.task().await;
    assert_eq!(t.kind, "hello");
    w.send(done(&t, json!({"greeted": name}))).await;
    assert!(
        w.ack().await.accepted,
        "{name}: the result must be accepted"
    );
    let r = c
        .wait_resource("hello", name, "Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(r["status"], json!({"greeted": name}));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gzip_client_completes_a_task_and_plain_clients_still_do() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest_any_status(0))
        .await;

    // The unary call too: a gzip request was UNIMPLEMENTED before the broker accepted gzip.
    let mut client = gzip(
        WorkerServiceClient::connect(c.broker.clone())
            .await
            .unwrap(),
    );
    client
        .get_provider_config(pb::GetProviderConfigRequest {
            kinds: vec!["hello".into()],
            kind_versions: vec![1],
        })
        .await
        .expect("a gzip GetProviderConfig is served");

    let mut w = RawWorker::connect_with(&c.broker, subscribe("hello"), gzip)
        .await
        .expect("a gzip WorkStream is served");
    complete_one(&c, &mut w, "zipped").await;
    drop(w);

    let mut plain = RawWorker::subscribe(&c).await;
    complete_one(&c, &mut plain, "plain").await;
    drop(plain);

    // The Rust SDK with GRPC_COMPRESSION=gzip (the hello example worker).
    let _w = Worker::hello(&c.broker, "zipped-sdk", &[("GRPC_COMPRESSION", "gzip")]);
    let (status, _, body) = c
        .apply(
            &json!({"kind": "hello", "kind_version": 1, "name": "sdk", "spec": {"greeting": "hi"}}),
        )
        .await;
    assert!(status < 300, "{status} {body}");
    c.wait_resource("hello", "sdk", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    c.stop().await;
}

/// A compose result of `n` children with about `pad` bytes of spec each, the second of them
/// a repeat of the first (so the broker refuses it as a compose error, at its first check,
/// rather than writing it).
fn big_compose(n: usize, pad: usize) -> pb::ComposeResult {
    let filler = "x".repeat(pad);
    let child = |i: usize| pb::ChildSpec {
        kind: "part".into(),
        kind_version: 1,
        name: format!("part-{i:06}"),
        spec: format!(r#"{{"index":{i},"pad":"{filler}"}}"#).into_bytes(),
        ..Default::default()
    };
    let mut desired: Vec<pb::ChildSpec> = (0..n).map(child).collect();
    desired[1] = child(0);
    pb::ComposeResult {
        desired,
        ..Default::default()
    }
}

/// Starts converge with `env` and the composite kind `bom`, subscribes a raw worker whose
/// client may send and accept 512 MiB, and sends the compose result `result` for `bom/big`.
async fn send_compose(env: &[(&str, &str)], result: pb::ComposeResult) -> (Converge, RawWorker) {
    let c = Converge::start(env).await;
    c.apply_manifest(&json!({"kind": "bom", "kind_version": 1, "reactions": [
        {"name": "compose", "trigger": "specChange", "emits": ["children", "edges", "status"]},
        {"name": "rollup", "trigger": "childrenSettled", "emits": ["status"]}]}))
        .await;
    let big = 512 * 1024 * 1024;
    let mut w = RawWorker::connect_with(&c.broker, subscribe("bom"), |c| {
        c.max_encoding_message_size(big)
            .max_decoding_message_size(big)
    })
    .await
    .unwrap();
    let (status, _, body) = c
        .apply(&json!({"kind": "bom", "kind_version": 1, "name": "big", "spec": {}}))
        .await;
    assert!(status < 300, "apply bom/big: {status} {body}");
    let t = w.task().await;
    assert_eq!(t.stage, pb::Stage::Compose as i32);
    w.send(Out::Complete(pb::StageComplete {
        lease_token: t.lease_token.clone(),
        stage: t.stage,
        claim_epoch: t.claim_epoch,
        compose: Some(result),
        ..Default::default()
    }))
    .await;
    (c, w)
}

/// About 300 MB, what a bill of materials of a million small children comes to, against the
/// broker's limit.
///
/// What "accepted" is checked to mean: the frame crosses the transport and the broker
/// decodes it and hands it to the compose pipeline (a message reaches a handler only
/// decoded whole). The result is not written: the compose write passes the children to
/// PostgreSQL as one jsonb parameter, and a jsonb value stops at 256 MB (268,435,455
/// bytes), below this result; and writing ~150,000 children through the engine takes
/// minutes in a debug build. So its second child repeats its first, and the pipeline
/// refuses it as a compose error naming that child: proof the whole frame arrived and was
/// decoded, with no write and no pass over 300 MB of specs in a debug build.
#[tokio::test(flavor = "multi_thread")]
async fn a_300_mb_compose_result_is_refused_by_default_and_read_when_the_limit_is_raised() {
    let result = big_compose(150_000, 1_980);
    let size = prost::Message::encoded_len(&result);
    assert!(
        (280_000_000..330_000_000).contains(&size),
        "the compose result is {size} bytes"
    );

    // At the default 64 MiB: the stream ends with RESOURCE_EXHAUSTED naming the limit and
    // the variable that raises it (tonic refuses the frame from its length prefix, before
    // buffering it).
    let (c, mut w) = send_compose(&[], result.clone()).await;
    let status = loop {
        match tokio::time::timeout(T, w.rx.message()).await {
            Ok(Ok(Some(_config_push))) => continue,
            Ok(Ok(None)) => panic!("the stream ended without a status"),
            Ok(Err(s)) => break s,
            Err(_) => panic!("no answer to a 300 MB frame within {T:?}"),
        }
    };
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    for part in ["67108864", "GRPC_MAX_MESSAGE_BYTES", "536870912"] {
        assert!(status.message().contains(part), "{}", status.message());
    }
    drop(w);
    c.stop().await;

    // With GRPC_MAX_MESSAGE_BYTES at 512 MiB the same frame is decoded and judged.
    let (c, w) = send_compose(&[("GRPC_MAX_MESSAGE_BYTES", "536870912")], result).await;
    let r = c
        .wait_resource("bom", "big", "Failed", T, |v| v["phase"] == "Failed")
        .await;
    let msg = r["failure_message"].as_str().unwrap();
    assert!(
        msg.contains("part/part-000000") && msg.contains("emitted twice"),
        "{msg}"
    );
    drop(w);
    c.stop().await;
}

/// Lists the services of server reflection protocol `$v` (a tonic-reflection module) on
/// `$channel`, and checks that the descriptor file of each of `$symbols` is served.
macro_rules! reflect {
    ($v:ident, $channel:expr, $symbols:expr) => {{
        use tonic_reflection::pb::$v::{
            ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
            server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        };
        let mut client = ServerReflectionClient::new($channel);
        let mut ask = async |req: MessageRequest| {
            let req = ServerReflectionRequest {
                host: String::new(),
                message_request: Some(req),
            };
            let mut answers = client
                .server_reflection_info(tokio_stream::iter([req]))
                .await
                .expect("reflection is served")
                .into_inner();
            answers
                .message()
                .await
                .unwrap()
                .expect("an answer")
                .message_response
                .expect("a response")
        };
        let MessageResponse::ListServicesResponse(list) =
            ask(MessageRequest::ListServices(String::new())).await
        else {
            panic!("not a service list")
        };
        let services: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
        for symbol in $symbols {
            match ask(MessageRequest::FileContainingSymbol(symbol.to_string())).await {
                MessageResponse::FileDescriptorResponse(f) => {
                    assert!(!f.file_descriptor_proto.is_empty(), "{symbol}")
                }
                other => panic!("{symbol}: {other:?}"),
            }
        }
        services
    }};
}

#[tokio::test(flavor = "multi_thread")]
async fn reflection_lists_the_worker_service_and_health_over_v1_and_v1alpha() {
    let c = Converge::start(&[]).await;
    let channel = Channel::from_shared(c.broker.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let symbols = ["converge.worker.v1.WorkerService", "grpc.health.v1.Health"];
    let v1 = reflect!(v1, channel.clone(), symbols);
    let v1alpha = reflect!(v1alpha, channel, symbols);
    for (protocol, services) in [("v1", v1), ("v1alpha", v1alpha)] {
        for s in symbols {
            assert!(
                services.iter().any(|x| x == s),
                "{protocol}: {s} not in {services:?}"
            );
        }
    }
    c.stop().await;
}
