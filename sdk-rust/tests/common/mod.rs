//! Test doubles for the runtime tests: an in-process broker (the protocol side of
//! WorkerService only, over loopback TCP, plaintext or TLS, recording the `authorization`
//! each call carried), a scriptable provider, polling helpers and log capture. The
//! end-to-end tests start the real `converge` with `converge_testkit`.

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the harness"
)]

use std::{
    future::Future,
    io::Write,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use converge_sdk::{
    Condition, HandlerError, KindVersion, Outcome, Provider, ProviderConfig, ReactionRequest,
    Registry, WorkerConfig, WorkerError,
    pb::{
        self,
        work_stream_client_msg::Body as Up,
        work_stream_server_msg::Body as Down,
        worker_service_server::{WorkerService, WorkerServiceServer},
    },
};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_stream::wrappers::{TcpListenerStream, UnboundedReceiverStream};
use tonic::{Request, Response, Status, Streaming};

/// How long any single wait in a test may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// Awaits `fut`, failing the test with `what` after [`WAIT`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// Polls `cond` until it holds, failing the test with `what` after [`WAIT`].
pub async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    within(what, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

type Outbound = mpsc::UnboundedSender<Result<pb::WorkStreamServerMsg, Status>>;

/// One WorkStream the worker opened, seen from the broker side.
pub struct Conn {
    inbound: mpsc::UnboundedReceiver<pb::WorkStreamClientMsg>,
    outbound: Option<Outbound>,
    /// Every frame received on this stream so far, in order.
    pub seen: Vec<Up>,
    /// The `authorization` metadata the stream was opened with.
    pub authorization: Option<String>,
}

impl Conn {
    /// The next frame from the worker; `None` once the worker closed the stream.
    pub async fn try_next(&mut self) -> Option<Up> {
        let msg = within("a frame from the worker", self.inbound.recv()).await?;
        let body = msg.body.expect("frame without a body");
        self.seen.push(body.clone());
        Some(body)
    }

    /// The next frame from the worker.
    pub async fn next(&mut self) -> Up {
        self.try_next().await.expect("worker closed the stream")
    }

    /// Skips frames until `f` accepts one.
    pub async fn next_where<T>(&mut self, mut f: impl FnMut(&Up) -> Option<T>) -> T {
        loop {
            let b = self.next().await;
            if let Some(t) = f(&b) {
                return t;
            }
        }
    }

    /// Skips frames until the StageComplete of `token`.
    pub async fn complete_for(&mut self, token: &str) -> pb::StageComplete {
        self.next_where(|b| match b {
            Up::Complete(c) if c.lease_token == token => Some(c.clone()),
            _ => None,
        })
        .await
    }

    /// The first frame, which must be Subscribe.
    pub async fn subscribe(&mut self) -> pb::Subscribe {
        match self.next().await {
            Up::Subscribe(s) => s,
            other => panic!("first frame is not Subscribe: {other:?}"),
        }
    }

    /// Waits until the worker ends the stream.
    pub async fn closed(&mut self) {
        while self.try_next().await.is_some() {}
    }

    /// Sends a frame to the worker.
    pub fn send(&self, body: Down) {
        self.outbound
            .as_ref()
            .expect("stream already closed")
            .send(Ok(pb::WorkStreamServerMsg { body: Some(body) }))
            .expect("worker stream gone");
    }

    /// Sends a CompleteAck.
    pub fn ack(&self, token: &str, epoch: i64, accepted: bool) {
        self.send(Down::Ack(pb::CompleteAck {
            lease_token: token.into(),
            claim_epoch: epoch,
            accepted,
        }));
    }

    /// Ends the stream from the broker side (as a broker that lost it would).
    pub fn close(&mut self) {
        self.outbound = None;
    }

    /// Whether any StageComplete for `token` was received on this stream.
    pub fn saw_complete_for(&self, token: &str) -> bool {
        self.seen
            .iter()
            .any(|b| matches!(b, Up::Complete(c) if c.lease_token == token))
    }
}

struct Service {
    conns: mpsc::UnboundedSender<Conn>,
    configs: Arc<Mutex<Vec<pb::ProviderConfigEntry>>>,
    config_pulls: Arc<AtomicUsize>,
    config_failures: Arc<AtomicUsize>,
    config_auth: Arc<Mutex<Vec<Option<String>>>>,
}

/// The `authorization` metadata of a request, as text.
fn authorization<T>(request: &Request<T>) -> Option<String> {
    request
        .metadata()
        .get("authorization")
        .map(|v| v.to_str().expect("ASCII authorization").to_string())
}

#[tonic::async_trait]
impl WorkerService for Service {
    type WorkStreamStream = UnboundedReceiverStream<Result<pb::WorkStreamServerMsg, Status>>;

    async fn work_stream(
        &self,
        request: Request<Streaming<pb::WorkStreamClientMsg>>,
    ) -> Result<Response<Self::WorkStreamStream>, Status> {
        let auth = authorization(&request);
        let mut stream = request.into_inner();
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(m)) = stream.message().await {
                if in_tx.send(m).is_err() {
                    break;
                }
            }
        });
        let conn = Conn {
            inbound: in_rx,
            outbound: Some(out_tx),
            seen: Vec::new(),
            authorization: auth,
        };
        self.conns
            .send(conn)
            .map_err(|_| Status::unavailable("test over"))?;
        Ok(Response::new(UnboundedReceiverStream::new(out_rx)))
    }

    async fn get_provider_config(
        &self,
        request: Request<pb::GetProviderConfigRequest>,
    ) -> Result<Response<pb::GetProviderConfigResponse>, Status> {
        self.config_auth
            .lock()
            .unwrap()
            .push(authorization(&request));
        self.config_pulls.fetch_add(1, Ordering::SeqCst);
        let failing = self
            .config_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(Status::unavailable("config store not ready"));
        }
        let req = request.into_inner();
        let entries = self
            .configs
            .lock()
            .unwrap()
            .iter()
            .filter(|e| {
                req.kinds.iter().enumerate().any(|(i, k)| {
                    *k == e.kind && req.kind_versions.get(i).copied().unwrap_or(1) == e.kind_version
                })
            })
            .cloned()
            .collect();
        Ok(Response::new(pb::GetProviderConfigResponse { entries }))
    }

    async fn list_descendants(
        &self,
        _request: Request<pb::ListDescendantsRequest>,
    ) -> Result<Response<pb::ListDescendantsResponse>, Status> {
        // The paged read is proven against the real broker (converge/tests/e2e_rollup_pages.rs).
        Err(Status::unimplemented("not served by the test double"))
    }
}

/// An in-process broker double listening on 127.0.0.1:0.
pub struct TestBroker {
    /// `http://127.0.0.1:<port>` (`https://` when started with TLS).
    pub addr: String,
    conns: mpsc::UnboundedReceiver<Conn>,
    /// Default configs GetProviderConfig answers with.
    pub configs: Arc<Mutex<Vec<pb::ProviderConfigEntry>>>,
    /// How many GetProviderConfig calls arrived.
    pub config_pulls: Arc<AtomicUsize>,
    /// How many of the next GetProviderConfig calls fail with UNAVAILABLE.
    pub config_failures: Arc<AtomicUsize>,
    /// The `authorization` metadata of every GetProviderConfig call, in order.
    pub config_auth: Arc<Mutex<Vec<Option<String>>>>,
    _stop: oneshot::Sender<()>,
}

impl TestBroker {
    /// Starts the broker double (plaintext h2c).
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// Starts the broker double serving TLS with this PEM certificate and key; with
    /// `client_ca` (PEM) it requires client certificates issued by it.
    pub async fn start_tls(cert_pem: &str, key_pem: &str, client_ca: Option<&str>) -> Self {
        let mut tls = tonic::transport::ServerTlsConfig::new()
            .identity(tonic::transport::Identity::from_pem(cert_pem, key_pem));
        if let Some(ca) = client_ca {
            tls = tls.client_ca_root(tonic::transport::Certificate::from_pem(ca));
        }
        Self::start_with(Some(tls)).await
    }

    async fn start_with(tls: Option<tonic::transport::ServerTlsConfig>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let addr = format!("{scheme}://{}", listener.local_addr().unwrap());
        let (conn_tx, conns) = mpsc::unbounded_channel();
        let configs = Arc::new(Mutex::new(Vec::new()));
        let config_pulls = Arc::new(AtomicUsize::new(0));
        let config_failures = Arc::new(AtomicUsize::new(0));
        let config_auth = Arc::new(Mutex::new(Vec::new()));
        let svc = Service {
            conns: conn_tx,
            configs: Arc::clone(&configs),
            config_pulls: Arc::clone(&config_pulls),
            config_failures: Arc::clone(&config_failures),
            config_auth: Arc::clone(&config_auth),
        };
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let mut server = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            server = server.tls_config(tls).unwrap();
        }
        tokio::spawn(async move {
            server
                .add_service(WorkerServiceServer::new(svc))
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                    let _ = stop_rx.await;
                })
                .await
                .unwrap();
        });
        Self {
            addr,
            conns,
            configs,
            config_pulls,
            config_failures,
            config_auth,
            _stop: stop_tx,
        }
    }

    /// The next WorkStream the worker opens.
    pub async fn conn(&mut self) -> Conn {
        within("the worker to open a work stream", self.conns.recv())
            .await
            .expect("broker stopped")
    }

    /// The next WorkStream the worker opens within `limit` (for waits longer than [`WAIT`]).
    pub async fn conn_within(&mut self, limit: Duration) -> Option<Conn> {
        tokio::time::timeout(limit, self.conns.recv())
            .await
            .ok()
            .flatten()
    }
}

/// A worker running in the background.
pub struct Worker {
    shutdown: Option<oneshot::Sender<()>>,
    join: tokio::task::JoinHandle<Result<(), WorkerError>>,
}

impl Worker {
    /// Test defaults: fast reconnects and readiness polls, no heartbeats unless asked.
    pub fn config(broker: &TestBroker) -> WorkerConfig {
        let mut cfg = WorkerConfig::new(broker.addr.clone());
        cfg.worker_name = "test-worker".into();
        cfg.max_parallel = 4;
        cfg.drain_timeout = Duration::from_secs(5);
        cfg.heartbeat_every = Duration::from_secs(3600);
        cfg.readiness_poll = Duration::from_millis(20);
        cfg.reconnect_min = Duration::from_millis(10);
        cfg.reconnect_max = Duration::from_millis(50);
        cfg
    }

    /// Starts `run_worker` with `cfg`.
    pub fn start(cfg: WorkerConfig, registry: Registry) -> Self {
        let (tx, rx) = oneshot::channel::<()>();
        let join = tokio::spawn(converge_sdk::run_worker(cfg, registry, async {
            let _ = rx.await;
        }));
        Self {
            shutdown: Some(tx),
            join,
        }
    }

    /// Resolves the shutdown future.
    pub fn request_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Whether `run_worker` has returned.
    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }

    /// Waits for `run_worker` to return.
    pub async fn finished(self) -> Result<(), WorkerError> {
        within("the worker to stop", self.join)
            .await
            .expect("worker task panicked")
    }
}

/// Observations and controls shared between a test and its [`Scripted`] provider.
pub struct Probe {
    /// Handlers started.
    pub started: AtomicUsize,
    /// Handlers running now.
    pub current: AtomicUsize,
    /// Most handlers seen running at once.
    pub max: AtomicUsize,
    /// Handlers that saw their cancellation token fire.
    pub cancelled: AtomicUsize,
    /// Permits for `block` handlers.
    pub gate: Semaphore,
    /// What `ready()` returns.
    pub ready: AtomicBool,
    /// Every `on_config` call, in order.
    pub configs: Mutex<Vec<ProviderConfig>>,
    /// Every request handled, in order.
    pub requests: Mutex<Vec<ReactionRequest>>,
}

impl Probe {
    /// A ready probe with a closed gate.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            started: AtomicUsize::new(0),
            current: AtomicUsize::new(0),
            max: AtomicUsize::new(0),
            cancelled: AtomicUsize::new(0),
            gate: Semaphore::new(0),
            ready: AtomicBool::new(true),
            configs: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
        })
    }

    /// Counter value.
    pub fn get(c: &AtomicUsize) -> usize {
        c.load(Ordering::SeqCst)
    }
}

/// A provider whose behaviour is picked by the task's `spec.mode`:
/// `ok` (default), `panic`, `terminal`, `transient`, `block` (waits for a gate permit),
/// `wait_cancel` (waits for its token), `compose` (returns a child and an edge).
pub struct Scripted {
    /// The pair served.
    pub kv: KindVersion,
    /// Shared observations.
    pub probe: Arc<Probe>,
}

impl Scripted {
    /// A provider for `kind`@`version` reporting into `probe`.
    pub fn new(kind: &str, version: i32, probe: &Arc<Probe>) -> Self {
        Self {
            kv: KindVersion::new(kind, version),
            probe: Arc::clone(probe),
        }
    }
}

impl Provider for Scripted {
    fn kind(&self) -> KindVersion {
        self.kv.clone()
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let p = &self.probe;
        p.requests.lock().unwrap().push(req.clone());
        p.started.fetch_add(1, Ordering::SeqCst);
        let now = p.current.fetch_add(1, Ordering::SeqCst) + 1;
        p.max.fetch_max(now, Ordering::SeqCst);
        let mode = req
            .resource
            .spec
            .get("mode")
            .and_then(Value::as_str)
            .unwrap_or("ok")
            .to_string();
        let status = json!({
            "name": req.resource.name,
            "config": req.config.spec,
            "effective": req.effective_config(),
        });
        let res = match mode.as_str() {
            "ok" => {
                Ok(Outcome::status(status).with_condition(Condition::ready(true, "Ok", "fine")))
            }
            "panic" => panic!("boom in {}", req.resource.name),
            "terminal" => Err(HandlerError::terminal("bad input")),
            "transient" => Err(HandlerError::transient("try later")),
            "block" => {
                p.gate.acquire().await.unwrap().forget();
                Ok(Outcome::status(status))
            }
            "wait_cancel" => {
                req.cancel.cancelled().await;
                p.cancelled.fetch_add(1, Ordering::SeqCst);
                Err(HandlerError::transient("cancelled"))
            }
            "compose" => Ok(Outcome::status(status)
                .with_condition(Condition::ready(true, "Composed", ""))
                .with_child(converge_sdk::ChildSpec::new(
                    "leaf",
                    1,
                    "a",
                    json!({"x": 1}),
                ))
                .with_child(converge_sdk::ChildSpec::new("leaf", 1, "b", json!({}))))
            .map(|o| {
                o.with_edge(
                    converge_sdk::DepEdge::new(
                        converge_sdk::ResourceRef::new("leaf", "b"),
                        converge_sdk::ResourceRef::new("leaf", "a"),
                    )
                    .with_value(converge_sdk::ValueFlow::new("/x", "/out")),
                )
            }),
            other => Err(HandlerError::terminal(format!("unknown mode {other}"))),
        };
        p.current.fetch_sub(1, Ordering::SeqCst);
        res
    }

    fn on_config(&self, cfg: ProviderConfig) {
        self.probe.configs.lock().unwrap().push(cfg);
    }

    fn ready(&self) -> bool {
        self.probe.ready.load(Ordering::SeqCst)
    }
}

/// A resource message for `kind` named `name` with `spec`.
pub fn resource(kind: &str, name: &str, spec: Value) -> pb::Resource {
    pb::Resource {
        id: uuid::Uuid::new_v4().as_bytes().to_vec().into(),
        kind: kind.into(),
        name: name.into(),
        spec: serde_json::to_vec(&spec).unwrap().into(),
        generation: 3,
        kind_version: 1,
        phase: "Reconciling".into(),
        ..Default::default()
    }
}

/// A STAGE_WORK task for `kind`@1 whose resource is named after the lease token.
pub fn work_task(token: &str, epoch: i64, kind: &str, spec: Value) -> pb::StageTask {
    pb::StageTask {
        stage: pb::Stage::Work as i32,
        kind: kind.into(),
        kind_version: 1,
        generation: 3,
        reaction: "work".into(),
        lease_token: token.into(),
        claim_epoch: epoch,
        trigger: "specChange".into(),
        attempt: 1,
        request: Some(pb::stage_task::Request::WorkReq(pb::WorkRequest {
            resource: Some(resource(kind, token, spec)),
            status: Vec::new(),
        })),
        ..Default::default()
    }
}

/// Decodes JSON bytes from a StageComplete.
pub fn json_of(b: &[u8]) -> Value {
    serde_json::from_slice(b).expect("valid JSON")
}

/// Everything the runtime logs on this thread while the guard lives, as text. The tests run
/// on tokio's current-thread runtime, so every task of the worker logs on the test's thread.
///
/// One global subscriber (DEBUG, installed once) writes to the calling thread's sink. A
/// thread-local default subscriber per test would race: tracing caches each call site's
/// interest process-wide, so a call site first hit by another test's thread (with no
/// subscriber) could be cached as disabled and its line never reach this test.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

std::thread_local! {
    static SINK: std::cell::RefCell<Option<Logs>> = const { std::cell::RefCell::new(None) };
}

/// Stops this thread's capture when dropped.
pub struct Capture;

impl Drop for Capture {
    fn drop(&mut self) {
        SINK.with(|s| s.borrow_mut().take());
    }
}

/// The global subscriber's writer: the current thread's sink, or nowhere.
struct ThreadSink;

impl Write for ThreadSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        SINK.with(|s| {
            if let Some(l) = s.borrow().as_ref() {
                l.0.lock().unwrap().extend_from_slice(buf);
            }
        });
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures this thread's log lines into `self` until the returned guard drops.
    pub fn capture(&self) -> Capture {
        static INIT: std::sync::Once = std::sync::Once::new();
        INIT.call_once(|| {
            let subscriber = tracing_subscriber::fmt()
                .with_ansi(false)
                .with_max_level(tracing::Level::DEBUG)
                .with_writer(|| ThreadSink)
                .finish();
            tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
        });
        SINK.with(|s| *s.borrow_mut() = Some(self.clone()));
        Capture
    }

    /// Everything captured so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
