//! A raw WorkerService client for the tests that must see (or withhold) every frame: the
//! protocol rules, a stalled subscriber, a worker that never answers.

use std::time::Duration;

use converge_proto::pb::{
    self, work_stream_client_msg::Body as Out, work_stream_server_msg::Body as In,
    worker_service_client::WorkerServiceClient,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Streaming, transport::Channel};

use super::Converge;

/// One worker stream driven frame by frame.
pub struct RawWorker {
    pub tx: mpsc::Sender<pb::WorkStreamClientMsg>,
    pub rx: Streaming<pb::WorkStreamServerMsg>,
}

impl RawWorker {
    pub async fn connect(c: &Converge, first: Out) -> Result<RawWorker, tonic::Status> {
        RawWorker::connect_to(&c.broker, first).await
    }

    pub async fn connect_to(broker: &str, first: Out) -> Result<RawWorker, tonic::Status> {
        RawWorker::connect_with(broker, first, |c| c).await
    }

    /// [`RawWorker::connect_to`] with a client shaped by `shape` (compression, size limits).
    pub async fn connect_with(
        broker: &str,
        first: Out,
        shape: impl FnOnce(WorkerServiceClient<Channel>) -> WorkerServiceClient<Channel>,
    ) -> Result<RawWorker, tonic::Status> {
        let mut client = shape(
            WorkerServiceClient::connect(broker.to_string())
                .await
                .unwrap(),
        );
        let (tx, rx) = mpsc::channel(16);
        tx.send(pb::WorkStreamClientMsg { body: Some(first) })
            .await
            .unwrap();
        let rx = client
            .work_stream(ReceiverStream::new(rx))
            .await?
            .into_inner();
        Ok(RawWorker { tx, rx })
    }

    pub async fn subscribe(c: &Converge) -> RawWorker {
        RawWorker::connect(
            c,
            Out::Subscribe(pb::Subscribe {
                kinds: vec!["hello".into()],
                kind_versions: vec![1],
                max_inflight: 4,
                worker_name: "raw".into(),
                sdk: "test/0".into(),
                ..Default::default()
            }),
        )
        .await
        .unwrap()
    }

    pub async fn send(&self, body: Out) {
        self.tx
            .send(pb::WorkStreamClientMsg { body: Some(body) })
            .await
            .unwrap();
    }

    /// The next frame other than a config push.
    pub async fn next(&mut self, within: Duration) -> In {
        loop {
            let msg = tokio::time::timeout(within, self.rx.message())
                .await
                .expect("no frame in time")
                .expect("stream failed")
                .expect("stream ended");
            match msg.body.expect("frame without body") {
                In::Config(_) => continue,
                other => return other,
            }
        }
    }

    pub async fn task(&mut self) -> pb::StageTask {
        match self.next(Duration::from_secs(10)).await {
            In::Task(t) => t,
            other => panic!("expected a task, got {other:?}"),
        }
    }

    pub async fn ack(&mut self) -> pb::CompleteAck {
        match self.next(Duration::from_secs(10)).await {
            In::Ack(a) => a,
            other => panic!("expected an ack, got {other:?}"),
        }
    }
}
