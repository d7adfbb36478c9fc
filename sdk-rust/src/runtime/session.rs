//! One WorkStream session and the reconnect loop around it, which walks the broker list
//! (see `failover`).

use std::{error::Error as StdError, fmt, panic::AssertUnwindSafe, sync::Arc, time::Duration};

use converge_proto::pb::{
    self, work_stream_server_msg::Body, worker_service_client::WorkerServiceClient,
};
use tokio::{sync::mpsc, time::Instant};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use super::{
    dial::Dial,
    failover::Failover,
    state::{LeaseKey, Shared, provider_config},
    task,
};
use crate::{
    config::{Compression, WorkerConfig},
    convert::wire_version,
    descendants::Lister,
    error::ConfigError,
    types::KindVersion,
};
use tonic::codec::CompressionEncoding;

/// Bound on one GetProviderConfig call.
const CONFIG_PULL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a session ended without an error.
#[derive(Debug)]
enum SessionEnd {
    /// The broker asked us to drain and everything was delivered.
    Drained,
    /// The broker closed the stream.
    Closed,
}

/// Why a session failed.
#[derive(Debug)]
pub(crate) enum SessionError {
    /// The token or TLS files, re-read for this connection, are unusable now.
    Credentials(ConfigError),
    Connect(tonic::transport::Error),
    /// The broker answered the call (GetProviderConfig, or WorkStream before it opened)
    /// with an error.
    Refused(tonic::Status),
    /// The stream had opened and then failed.
    Lost(tonic::Status),
}

impl SessionError {
    /// Whether a work stream had opened before the failure.
    fn opened(&self) -> bool {
        matches!(self, Self::Lost(_))
    }
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Credentials(_) => f.write_str("cannot prepare the connection's credentials"),
            Self::Connect(_) => f.write_str("cannot connect to the broker"),
            Self::Refused(s) | Self::Lost(s) => {
                let what = if self.opened() {
                    "stream failed"
                } else {
                    "refused"
                };
                write!(f, "{what}: {}: {}", s.code(), s.message())?;
                // The two refusals an operator fixes on the worker's side, not by waiting.
                match s.code() {
                    tonic::Code::Unauthenticated => f.write_str(
                        " (check WORKER_TOKEN / WORKER_TOKEN_FILE or the client certificate)",
                    ),
                    tonic::Code::PermissionDenied => f.write_str(
                        " (the worker's principal may not serve these kinds; see its kinds in AUTH_FILE)",
                    ),
                    _ => Ok(()),
                }
            }
        }
    }
}

impl StdError for SessionError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Credentials(e) => Some(e),
            Self::Connect(e) => Some(e),
            Self::Refused(_) | Self::Lost(_) => None,
        }
    }
}

/// An error with its whole source chain, for a single log line.
pub(crate) fn chain(e: &dyn StdError) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// A WorkerService client on `channel` with the configured message limit both ways and, with
/// `GRPC_COMPRESSION=gzip`, gzip both ways (the broker answers gzip only to gzip).
fn client(
    channel: tonic::transport::Channel,
    cfg: &WorkerConfig,
) -> WorkerServiceClient<tonic::transport::Channel> {
    let c = WorkerServiceClient::new(channel)
        .max_decoding_message_size(cfg.max_message_bytes)
        .max_encoding_message_size(cfg.max_message_bytes);
    match cfg.compression {
        Compression::None => c,
        Compression::Gzip => c
            .send_compressed(CompressionEncoding::Gzip)
            .accept_compressed(CompressionEncoding::Gzip),
    }
}

/// A connected channel and the credentials read for it.
struct Connection {
    channel: tonic::transport::Channel,
    dial: Dial,
}

/// A fresh connection per session to `addr`, so that after a drain a load balancer (or the
/// next entry of the list) can give the next one another broker; the token and TLS files
/// are re-read for each, so rotating them needs no restart.
async fn connect(shared: &Shared, addr: &str) -> Result<Connection, SessionError> {
    let dial = Dial::prepare(&shared.cfg, addr).map_err(SessionError::Credentials)?;
    let channel = dial
        .endpoint
        .connect()
        .await
        .map_err(SessionError::Connect)?;
    Ok(Connection { channel, dial })
}

/// One GetProviderConfig call per registered pair. One call for all of them would carry
/// every pair's bundle in one answer: seven kinds served by one 12 MB WASM component made an
/// 85 MB answer that neither side could send past the 64 MiB message cap, so the worker
/// never started. Per pair, an answer is bounded by one bundle (`MAX_BUNDLE_BYTES`).
async fn pull_configs(
    conn: &Connection,
    shared: &Shared,
) -> Result<Vec<pb::ProviderConfigEntry>, SessionError> {
    let mut entries = Vec::new();
    for e in shared.registry.entries() {
        let req = pb::GetProviderConfigRequest {
            kinds: vec![e.kv.kind.clone()],
            kind_versions: vec![e.kv.version],
        };
        let mut request = tonic::Request::new(req);
        request.set_timeout(CONFIG_PULL_TIMEOUT);
        conn.dial.authorize(request.metadata_mut());
        let resp = client(conn.channel.clone(), &shared.cfg)
            .get_provider_config(request)
            .await
            .map_err(SessionError::Refused)?;
        entries.extend(resp.into_inner().entries);
    }
    Ok(entries)
}

/// Loads every registered pair's default config from the first broker of the list that
/// answers (retrying along the list with jittered backoff until one does), and fires
/// `on_config` for each before any task can arrive. Returns the failover position, on the
/// broker that answered, for the connection loop to start from.
pub(crate) async fn prime(shared: &Shared) -> Failover {
    let addrs = &shared.cfg.broker_addrs;
    let mut failover = Failover::new(
        addrs.len(),
        shared.cfg.reconnect_min,
        shared.cfg.reconnect_max,
    );
    loop {
        let addr = &addrs[failover.current()];
        let res = async {
            let conn = connect(shared, addr).await?;
            pull_configs(&conn, shared).await
        }
        .await;
        match res {
            Ok(entries) => {
                info!(configs = entries.len(), broker = %addr, "provider configs loaded");
                shared.apply_pulled(entries, true);
                failover.succeeded();
                return failover;
            }
            Err(e) => {
                let delay = failover.failed();
                let next = &addrs[failover.current()];
                warn!(error = %chain(&e), broker = %addr, next = %next, retry_in = ?delay, "cannot load provider configs; retrying");
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// Polls every provider's `ready()`, containing panics (a panicking probe counts as unready).
pub(crate) fn poll_readiness(shared: &Shared) -> Vec<(KindVersion, bool)> {
    shared
        .registry
        .entries()
        .iter()
        .map(|e| {
            let p = &e.provider;
            let ready = std::panic::catch_unwind(AssertUnwindSafe(|| p.ready())).unwrap_or_else(|_| {
                warn!(kind = %e.kv.kind, kind_version = e.kv.version, "ready() panicked; treating the provider as unready");
                false
            });
            (e.kv.clone(), ready)
        })
        .collect()
}

/// Detaches the session's sender however the session ends (including being dropped).
struct SessionGuard<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for SessionGuard<'_> {
    fn drop(&mut self) {
        self.shared.close_session(self.id);
    }
}

async fn session(
    shared: &Arc<Shared>,
    addr: &str,
    reconnect: bool,
) -> Result<SessionEnd, SessionError> {
    let conn = connect(shared, addr).await?;
    if reconnect {
        // Pulled before the stream opens, so the broker's own push at subscribe time (newer)
        // is applied after it.
        match pull_configs(&conn, shared).await {
            Ok(entries) => shared.apply_pulled(entries, false),
            Err(e) => warn!(error = %chain(&e), "config re-pull after reconnect failed"),
        }
    }
    let readiness = poll_readiness(shared);
    let (tx, rx) = mpsc::unbounded_channel();
    let id = shared.open_session(tx, &readiness);
    let _guard = SessionGuard { shared, id };
    let mut request = tonic::Request::new(UnboundedReceiverStream::new(rx));
    conn.dial.authorize(request.metadata_mut());
    // Answers (headers) come once the broker has taken the Subscribe: from here on the
    // stream counts as opened.
    // The session's tasks page through descendants on the same connection and credentials.
    let client = client(conn.channel, &shared.cfg);
    let lister = Lister {
        client: client.clone(),
        bearer: conn.dial.bearer(),
    };
    let mut inbound = client
        .clone()
        .work_stream(request)
        .await
        .map_err(SessionError::Refused)?
        .into_inner();
    info!(session = id, broker = %addr, "work stream open");

    let mut outstanding = shared.outstanding();
    let mut draining = false;
    loop {
        let delivered = async {
            if draining {
                // An error means the sender is gone, i.e. the worker is ending anyway.
                let _ = outstanding.wait_for(|n| *n == 0).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        let msg = tokio::select! {
            () = delivered => {
                info!(session = id, "drained: in-flight work delivered; closing the stream");
                return Ok(SessionEnd::Drained);
            }
            m = inbound.message() => m,
        };
        let Some(msg) = msg.map_err(SessionError::Lost)? else {
            return Ok(SessionEnd::Closed);
        };
        match msg.body {
            Some(Body::Task(t)) => {
                let refuse = if draining {
                    Some("worker stream is draining; task refused")
                } else if shared.is_shutting_down() {
                    Some("worker is shutting down; task refused")
                } else {
                    None
                };
                task::accept(shared, t, refuse, &lister);
            }
            Some(Body::Config(u)) => {
                let kv = KindVersion::new(u.kind, wire_version(u.kind_version));
                match shared.registry.find(&kv.kind, kv.version) {
                    Some(reg) => {
                        let cfg = provider_config(&kv, &u.config, u.bundle);
                        shared.apply_config(reg, cfg, true);
                        // Readiness often follows config: re-evaluate now, not at the
                        // next poll, so the broker hears the flip at once.
                        shared.update_readiness(&poll_readiness(shared));
                    }
                    None => {
                        debug!(kind = %kv.kind, kind_version = kv.version, "config for an unserved pair ignored")
                    }
                }
            }
            Some(Body::Ack(a)) => {
                shared.ack(&LeaseKey::new(a.lease_token, a.claim_epoch), a.accepted)
            }
            Some(Body::Cancel(c)) => {
                let key = LeaseKey::new(c.lease_token, c.claim_epoch);
                let known = shared.cancel_task(&key, &c.reason);
                info!(lease = %key.token, claim_epoch = key.epoch, reason = %c.reason, known, "task cancelled by the broker");
            }
            Some(Body::Drain(d)) => {
                let (running, unacked) = shared.counts();
                info!(session = id, reason = %d.reason, running, unacked, "broker is draining; finishing in-flight work before reconnecting");
                draining = true;
            }
            None => debug!("empty frame ignored"),
        }
    }
}

/// Runs sessions until `stop`, starting on the broker `failover` points at and moving along
/// the list on every failure or stream end (see `failover` for the waits and the backoff).
/// Handlers keep running across reconnects.
pub(crate) async fn connection_loop(
    shared: Arc<Shared>,
    stop: CancellationToken,
    mut failover: Failover,
) {
    let mut reconnect = false;
    let mut n: u64 = 0;
    loop {
        n += 1;
        let addr = &shared.cfg.broker_addrs[failover.current()];
        let started = Instant::now();
        let res = tokio::select! {
            () = stop.cancelled() => return,
            r = session(&shared, addr, reconnect).instrument(info_span!("session", attempt = n)) => r,
        };
        reconnect = true;
        let opened = res.as_ref().map_or_else(SessionError::opened, |_| true);
        match res {
            Ok(SessionEnd::Drained) => info!(broker = %addr, "session drained"),
            Ok(SessionEnd::Closed) => warn!(broker = %addr, "broker closed the work stream"),
            Err(e) if opened => warn!(error = %chain(&e), broker = %addr, "work stream lost"),
            Err(e) => warn!(error = %chain(&e), broker = %addr, "no work stream"),
        }
        let delay = if opened {
            failover.ended(started.elapsed())
        } else {
            failover.failed()
        };
        info!(broker = %shared.cfg.broker_addrs[failover.current()], retry_in = ?delay, "reconnecting");
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}
