//! `conformance-probe`: a deliberately misbehaving WorkerService client.
//!
//! Given `BROKER_ADDR` (`host:port` or `http://host:port`), it opens raw WorkStream streams
//! with the generated client (no SDK, so nothing tidies the frames up) and checks that the
//! broker answers each malformed client cleanly (stream rule 1, rule 5, the message-size cap)
//! and keeps serving afterwards:
//!
//! 1. first frame not `Subscribe` → `INVALID_ARGUMENT`;
//! 2. `Subscribe` with no kinds → `INVALID_ARGUMENT`;
//! 3. `StageComplete` for a lease the broker never issued → `CompleteAck{accepted:false}` or
//!    a clean error status (never an accepted ack, never a crash);
//! 4. `StageComplete` whose lease token is not a token at all → the same;
//! 5. a frame over `MAX_MESSAGE_BYTES` → an error status or the stream closed;
//! 6. afterwards the broker still answers `GetProviderConfig` and accepts a new Subscribe.
//!
//! Prints one line per check; exits 0 when every check passed, 1 otherwise.

use std::{process::ExitCode, time::Duration};

use converge_proto::pb::{
    self, work_stream_client_msg::Body as Out, work_stream_server_msg::Body as In,
    worker_service_client::WorkerServiceClient,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status, Streaming, transport::Channel};

/// A kind no worker serves, so subscribing to it never steals the form's tasks.
const PROBE_KIND: &str = "conf-probe-unserved";
/// How long any single answer may take.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// One open WorkStream: the sender keeps the request half open while we read.
struct RawStream {
    tx: mpsc::Sender<pb::WorkStreamClientMsg>,
    rx: Streaming<pb::WorkStreamServerMsg>,
}

/// What the broker did in answer to a frame.
#[derive(Debug)]
enum Answer {
    Frame(Box<In>),
    Error(Status),
    Closed,
    Silent,
}

fn broker_url() -> Result<String, String> {
    let addr = std::env::var("BROKER_ADDR").map_err(|_| "BROKER_ADDR is not set".to_string())?;
    Ok(if addr.contains("://") {
        addr
    } else {
        format!("http://{addr}")
    })
}

async fn client(url: &str) -> Result<WorkerServiceClient<Channel>, String> {
    let c = WorkerServiceClient::connect(url.to_string())
        .await
        .map_err(|e| format!("cannot connect to {url}: {e}"))?;
    // The probe must be able to *send* an oversized frame; the broker is the one to refuse it.
    Ok(c.max_encoding_message_size(usize::MAX))
}

/// Opens a stream whose first frame is `first`; `Err` is the broker's refusal.
async fn open(url: &str, first: Out) -> Result<Result<RawStream, Status>, String> {
    let mut c = client(url).await?;
    let (tx, rx) = mpsc::channel(4);
    tx.send(pb::WorkStreamClientMsg { body: Some(first) })
        .await
        .map_err(|_| "request channel closed".to_string())?;
    let call = tokio::time::timeout(ANSWER_WITHIN, c.work_stream(ReceiverStream::new(rx)))
        .await
        .map_err(|_| "the broker did not answer the stream open in time".to_string())?;
    Ok(call.map(|r| RawStream {
        tx,
        rx: r.into_inner(),
    }))
}

fn subscribe() -> Out {
    Out::Subscribe(pb::Subscribe {
        kinds: vec![PROBE_KIND.into()],
        kind_versions: vec![1],
        max_inflight: 1,
        worker_name: "conformance-probe".into(),
        sdk: "probe/0".into(),
        ..Default::default()
    })
}

impl RawStream {
    async fn send(&self, body: Out) -> Result<(), String> {
        self.tx
            .send(pb::WorkStreamClientMsg { body: Some(body) })
            .await
            .map_err(|_| "the request stream is closed".to_string())
    }

    /// The next frame that is not a config push (pushes are normal traffic, rule 2).
    async fn answer(&mut self) -> Answer {
        loop {
            match tokio::time::timeout(ANSWER_WITHIN, self.rx.message()).await {
                Err(_) => return Answer::Silent,
                Ok(Err(s)) => return Answer::Error(s),
                Ok(Ok(None)) => return Answer::Closed,
                Ok(Ok(Some(m))) => match m.body {
                    Some(In::Config(_)) | None => continue,
                    Some(other) => return Answer::Frame(Box::new(other)),
                },
            }
        }
    }
}

/// Whether a status is a deliberate refusal rather than a server fault.
fn clean(s: &Status) -> bool {
    !matches!(s.code(), Code::Internal | Code::Unknown | Code::Unavailable)
}

/// Checks 1 and 2: the stream is refused with INVALID_ARGUMENT.
async fn expect_invalid_argument(url: &str, first: Out) -> Result<String, String> {
    let status = match open(url, first).await? {
        Err(s) => s,
        // Some servers accept the call and fail the stream on the first read instead.
        Ok(mut stream) => match stream.answer().await {
            Answer::Error(s) => s,
            other => return Err(format!("expected INVALID_ARGUMENT, got {other:?}")),
        },
    };
    if status.code() == Code::InvalidArgument {
        Ok(format!("INVALID_ARGUMENT: {}", status.message()))
    } else {
        Err(format!(
            "expected INVALID_ARGUMENT, got {:?}: {}",
            status.code(),
            status.message()
        ))
    }
}

fn bogus_complete(lease_token: String) -> Out {
    Out::Complete(pb::StageComplete {
        lease_token,
        stage: pb::Stage::Work as i32,
        claim_epoch: 1,
        status: br#"{"probe":true}"#.to_vec(),
        ..Default::default()
    })
}

/// Checks 3 and 4: a result for a lease the broker never issued is refused, not applied.
async fn expect_refused_complete(url: &str, token: String) -> Result<String, String> {
    let mut stream = open(url, subscribe())
        .await?
        .map_err(|s| format!("a valid Subscribe was refused: {s}"))?;
    stream.send(bogus_complete(token)).await?;
    match stream.answer().await {
        Answer::Frame(f) => match *f {
            In::Ack(a) if !a.accepted => Ok("CompleteAck{accepted:false}".into()),
            In::Ack(_) => Err("an unknown lease was acked as accepted".into()),
            other => Err(format!("expected a refusing ack, got {other:?}")),
        },
        Answer::Error(s) if clean(&s) => Ok(format!("{:?}: {}", s.code(), s.message())),
        other => Err(format!(
            "expected a refusing ack or a clean error, got {other:?}"
        )),
    }
}

/// Check 5: a frame over the size cap ends the stream with an error, not a crash.
async fn expect_oversize_refused(url: &str) -> Result<String, String> {
    let mut stream = open(url, subscribe())
        .await?
        .map_err(|s| format!("a valid Subscribe was refused: {s}"))?;
    let huge = vec![b' '; converge_proto::MAX_MESSAGE_BYTES + 1024 * 1024];
    // A send failure means the broker already closed the stream: also a refusal.
    let _ = stream
        .send(Out::Complete(pb::StageComplete {
            lease_token: uuid::Uuid::new_v4().to_string(),
            stage: pb::Stage::Work as i32,
            claim_epoch: 1,
            status: huge,
            ..Default::default()
        }))
        .await;
    match stream.answer().await {
        Answer::Error(s) if clean(&s) => Ok(format!("{:?}: {}", s.code(), s.message())),
        // Accepted, but reported: a RESOURCE_EXHAUSTED status would tell the client why.
        Answer::Closed => Ok("stream closed without an error status".into()),
        other => Err(format!(
            "expected an error status or a closed stream, got {other:?}"
        )),
    }
}

/// Check 6: the broker is still up and serving new clients.
async fn expect_still_serving(url: &str) -> Result<String, String> {
    let mut c = client(url).await?;
    let req = pb::GetProviderConfigRequest {
        kinds: vec![PROBE_KIND.into()],
        kind_versions: vec![1],
    };
    tokio::time::timeout(ANSWER_WITHIN, c.get_provider_config(req))
        .await
        .map_err(|_| "GetProviderConfig did not answer in time".to_string())?
        .map_err(|s| format!("GetProviderConfig failed: {s}"))?;
    // A fresh stream still gets its refusal ack: the session machinery is alive too.
    expect_refused_complete(url, uuid::Uuid::new_v4().to_string()).await?;
    Ok("GetProviderConfig and a new stream answered".into())
}

/// Prints one check's result; returns whether it passed.
fn report(name: &str, r: Result<String, String>) -> bool {
    match r {
        Ok(how) => {
            println!("PASS {name}: {how}");
            true
        }
        Err(why) => {
            println!("FAIL {name}: {why}");
            false
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let url = match broker_url() {
        Ok(u) => u,
        Err(e) => {
            eprintln!("conformance-probe: {e}");
            return ExitCode::from(2);
        }
    };
    let heartbeat_first = Out::Heartbeat(pb::WorkHeartbeat::default());
    let empty_kinds = Out::Subscribe(pb::Subscribe::default());
    let results = [
        report(
            "first-frame-not-subscribe",
            expect_invalid_argument(&url, heartbeat_first).await,
        ),
        report(
            "subscribe-empty-kinds",
            expect_invalid_argument(&url, empty_kinds).await,
        ),
        report(
            "complete-unknown-lease",
            expect_refused_complete(&url, uuid::Uuid::new_v4().to_string()).await,
        ),
        report(
            "complete-garbage-lease",
            expect_refused_complete(&url, "not-a-lease-token".into()).await,
        ),
        report("oversize-frame", expect_oversize_refused(&url).await),
        report("still-serving", expect_still_serving(&url).await),
    ];
    if results.iter().all(|ok| *ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
