//! The `WorkerService` gRPC implementation: stream sessions (Subscribe, completions,
//! readiness, heartbeats, release on end) and `GetProviderConfig`.
//!
//! The top part below the crate root: [`Workers`] is given the handles of the parts it
//! feeds (registry, config cache, completion writer, handout, dispatcher) and the
//! settings it needs; the crate root's `Broker` implements the tonic trait by delegating
//! here, so the public service type stays `WorkerServiceServer<Broker>`.

use std::{collections::HashSet, net::SocketAddr, sync::Arc, time::Duration};

use prost::Message;
use sqlx::PgPool;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use converge_auth::{Principal, tls::PeerInfo};
use converge_engine::{
    db::{self, descendants},
    ids::{ClaimEpoch, KindPair, LeaseToken},
    metrics::{LeaseUse, Refused, TaskResult, metrics},
};
use converge_proto::{
    manifest::is_valid_kind_name,
    pb::{self, work_stream_client_msg::Body as In},
};

use crate::{
    authz,
    complete::{CompletionHandle, Job},
    configs::Configs,
    convert,
    dispatch::DispatchHandle,
    dryrun::{DryRuns, Taken},
    handout::Handout,
    manifests::Manifests,
    registry::{
        Closer, Held, Holder, Outbound, Registry, StreamEntry, StreamId, StreamOut, WorkerIdentity,
    },
    wire,
};

/// Most tasks one stream may ask for at once.
const MAX_STREAM_INFLIGHT: u32 = 10_000;

/// The (kind, version) pairs a Subscribe or GetProviderConfig names, at most `max` kinds
/// (`MAX_KINDS_PER_STREAM`: each kind of each stream costs the broker memory and every
/// dispatch pass time, so one request cannot name ten thousand).
fn pairs_from(kinds: &[String], versions: &[i32], max: usize) -> Result<Vec<KindPair>, Status> {
    if kinds.is_empty() {
        return Err(Status::invalid_argument("kinds must not be empty"));
    }
    if kinds.len() > max {
        return Err(Status::invalid_argument(format!(
            "{} kinds named; a stream serves at most {max} (MAX_KINDS_PER_STREAM on the \
             broker): split the kinds over several streams or raise the limit",
            kinds.len()
        )));
    }
    if versions.len() > kinds.len() {
        return Err(Status::invalid_argument(
            "kind_versions is longer than kinds",
        ));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(kinds.len());
    for (i, k) in kinds.iter().enumerate() {
        if !is_valid_kind_name(k) {
            // A short prefix only: the name is the client's and may be megabytes long.
            let shown: String = k.chars().take(64).collect();
            let cut = if shown.len() < k.len() { "…" } else { "" };
            return Err(Status::invalid_argument(format!(
                "kinds[{i}]: {shown:?}{cut} is not a valid kind name"
            )));
        }
        let v = versions.get(i).copied().unwrap_or(1);
        if !(0..=32767).contains(&v) {
            return Err(Status::invalid_argument(format!(
                "kind_versions[{i}]: {v} is out of range"
            )));
        }
        let p = KindPair::new(k.clone(), v);
        if seen.insert(p.clone()) {
            out.push(p);
        }
    }
    Ok(out)
}

fn parse_token(s: &str) -> Option<LeaseToken> {
    uuid::Uuid::parse_str(s).ok().map(LeaseToken)
}

/// Session settings (from `BrokerConfig`).
#[derive(Clone)]
pub(crate) struct ServiceOptions {
    /// This broker's identity (stamped on adopted leases).
    pub broker_id: String,
    /// Used when a worker subscribes with `max_inflight = 0`.
    pub default_max_inflight: u32,
    /// How long a new stream may take to send its Subscribe frame.
    pub subscribe_timeout: Duration,
    /// The message size limit (`GRPC_MAX_MESSAGE_BYTES`), named when a frame is over it.
    pub max_message_bytes: usize,
    /// Who may speak the WorkerService (`None`: authentication is off).
    pub auth: Option<Arc<converge_auth::Authenticator>>,
    /// Most kinds one Subscribe (or GetProviderConfig) may name (`MAX_KINDS_PER_STREAM`).
    pub max_kinds_per_stream: usize,
}

/// The handles a session feeds.
pub(crate) struct Parts {
    /// Streams and in-flight leases.
    pub registry: Arc<Registry>,
    /// Default provider configs (rule 2).
    pub configs: Arc<Configs>,
    /// Where results go.
    pub completions: CompletionHandle,
    /// Runs a composite's next stage after a stage result.
    pub handout: Handout,
    /// The registered kinds (a Subscribe for another is warned about).
    pub manifests: Arc<Manifests>,
    /// Woken when a slot frees or a stream becomes claimable.
    pub dispatch: DispatchHandle,
    /// Plans' dry runs: their answers are taken before any lease lookup.
    pub dry_runs: Arc<DryRuns>,
}

/// The WorkerService's state; cheap to clone (one per stream session).
#[derive(Clone)]
pub(crate) struct Workers {
    inner: Arc<Shared>,
}

struct Shared {
    opts: ServiceOptions,
    pool: PgPool,
    parts: Parts,
    /// Set once shutdown begins: new streams are refused.
    draining: CancellationToken,
    /// Encoded bytes of stage results being applied (see [`STAGE_RESULT_BUDGET`]).
    stage_budget: Arc<Semaphore>,
}

/// Most encoded bytes of pipeline stage results (compose results above all: 20,000 children
/// are a few MB on the wire and several times that decoded and re-encoded as the compose
/// write's JSON) the broker holds at once. Every composite of a large BOM composes at the
/// same moment, and with each result applied on its own task the broker held all of them:
/// 296 MB of converge RSS at 100,000 children, 1.1 GB at 1,000,000. A result waits for its
/// share in its stream's read loop, so a worker with more results waits on HTTP/2 flow
/// control instead of the broker buffering them; one larger than the budget takes all of it.
/// The database applies compose writes about two at a time on a small machine anyway, so
/// 8 MB (a dozen 5,000-child results) loses no throughput.
pub(crate) const STAGE_RESULT_BUDGET: usize = 8 << 20;

/// A stage result of more encoded bytes than this that has to wait for its share of
/// [`STAGE_RESULT_BUDGET`] waits encoded (see [`budget_share`]).
const WAIT_ENCODED_OVER: usize = 256 << 10;

/// Takes stage result `c`'s share of `budget` (its encoded size, at most all of it) and gives
/// `c` back with it. tonic has decoded `c` already, and a large compose result decoded is
/// about eight times its size on the wire (a 50,000-child result: 4.7 MB encoded, ~38 MB of
/// structs and strings), so each stream waiting behind a large apply used to hold one such
/// result. One that must wait and is larger than [`WAIT_ENCODED_OVER`] is encoded again for
/// the wait and decoded once its share is granted: milliseconds of CPU against tens of MB of
/// peak RSS (issue 44, BENCHMARKS.md). `None` only if this process cannot decode what it
/// just encoded.
async fn budget_share(
    budget: &Arc<Semaphore>,
    c: pb::StageComplete,
) -> (OwnedSemaphorePermit, Option<pb::StageComplete>) {
    let weight = c.encoded_len().clamp(1, STAGE_RESULT_BUDGET);
    let permits = u32::try_from(weight).unwrap_or(u32::MAX);
    // Queued at once, in arrival order, as before this wait was encoded: the one polled
    // `acquire` says whether it waits. (A `try_acquire` first put the 1M BOM's roots Ready
    // 4-7 % later in three interleaved pairs; queued at once, no difference.)
    let acquire = Arc::clone(budget).acquire_many_owned(permits);
    tokio::pin!(acquire);
    let granted = tokio::select! {
        biased;
        share = &mut acquire => Some(share),
        () = std::future::ready(()) => None,
    };
    if let Some(share) = granted {
        return (share.expect("the budget is never closed"), Some(c));
    }
    if weight <= WAIT_ENCODED_OVER {
        return (acquire.await.expect("the budget is never closed"), Some(c));
    }
    let wire = c.encode_to_vec();
    drop(c);
    let share = acquire.await.expect("the budget is never closed");
    match pb::StageComplete::decode(wire.as_slice()) {
        Ok(c) => (share, Some(c)),
        Err(e) => {
            tracing::error!(error = %e, "a stage result encoded for its wait did not decode");
            (share, None)
        }
    }
}

impl Workers {
    /// The service over `parts`.
    pub fn new(
        opts: ServiceOptions,
        pool: PgPool,
        parts: Parts,
        draining: CancellationToken,
    ) -> Self {
        Workers {
            inner: Arc::new(Shared {
                opts,
                pool,
                parts,
                draining,
                stage_budget: Arc::new(Semaphore::new(STAGE_RESULT_BUDGET)),
            }),
        }
    }

    /// The caller [`authz::Authenticated`] found for `req`.
    fn caller<T>(&self, req: &Request<T>) -> Result<Option<Arc<Principal>>, Status> {
        authz::caller(req, self.inner.opts.auth.is_some())
    }

    /// `WorkStream`: checks the caller and its Subscribe, registers the stream and starts
    /// its session; the returned stream carries the broker's frames.
    #[tracing::instrument(skip_all, fields(peer = ?peer_of(&req).map(|p| p.remote_addr)))]
    pub async fn work_stream(
        &self,
        req: Request<Streaming<pb::WorkStreamClientMsg>>,
    ) -> Result<Response<Outbound>, Status> {
        if self.inner.draining.is_cancelled() {
            return Err(Status::unavailable("broker is shutting down"));
        }
        let (peer, activity) = match peer_of(&req) {
            Some(p) => (Some(p.remote_addr), p.activity.clone()),
            None => (req.remote_addr(), None),
        };
        let principal = self.caller(&req)?;
        let mut inbound = req.into_inner();
        let first =
            tokio::time::timeout(self.inner.opts.subscribe_timeout, inbound.message()).await;
        let sub = match first {
            Ok(Ok(Some(pb::WorkStreamClientMsg {
                body: Some(In::Subscribe(s)),
            }))) => s,
            Ok(Ok(Some(_))) => {
                return Err(Status::invalid_argument("first message must be Subscribe"));
            }
            Ok(Ok(None)) => return Err(Status::invalid_argument("stream ended before Subscribe")),
            Ok(Err(s)) => return Err(s),
            Err(_) => return Err(Status::deadline_exceeded("no Subscribe received in time")),
        };
        let pairs = pairs_from(
            &sub.kinds,
            &sub.kind_versions,
            self.inner.opts.max_kinds_per_stream,
        )?;
        authz::check_kinds(principal.as_deref(), &pairs)?;
        let max_inflight = match sub.max_inflight {
            0 => self.inner.opts.default_max_inflight,
            n => n.min(MAX_STREAM_INFLIGHT),
        } as usize;
        let name: String = sub.worker_name.chars().take(128).collect();
        let (out, outbound) = StreamOut::new(max_inflight * 2 + 64);
        let closer = out.closer().clone();
        let sid = self.inner.parts.registry.add_stream(StreamEntry {
            out,
            who: WorkerIdentity {
                name: name.clone(),
                sdk: sub.sdk.chars().take(64).collect(),
                principal: principal.as_ref().map(|p| p.name.clone()),
                peer,
                connected_at: chrono::Utc::now(),
            },
            pairs: pairs.iter().cloned().collect(),
            unready: HashSet::new(),
            max_inflight,
            inflight: 0,
            claimable: false,
            draining: false,
            activity,
            suspect_since: None,
            dry_runs: sub.dry_runs,
        });
        let actor = principal.as_ref().map(|p| p.name.as_str()).unwrap_or("-");
        tracing::info!(stream = sid, worker = %name, principal = %actor, sdk = %sub.sdk, kinds = ?pairs, max_inflight, "worker subscribed");
        self.warn_unknown_kinds(sid, &name, &pairs).await;
        // A worker resumes at most what one stream may hold: more is not its own.
        let resumed: Vec<(LeaseToken, ClaimEpoch)> = sub
            .resumed
            .iter()
            .take(MAX_STREAM_INFLIGHT as usize)
            .filter_map(|r| parse_token(&r.lease_token).map(|t| (t, ClaimEpoch(r.claim_epoch))))
            .collect();
        tokio::spawn(session(
            self.clone(),
            Subscribed { sid, closer, pairs },
            inbound,
            resumed,
            principal,
        ));
        Ok(Response::new(outbound))
    }

    /// Warns about the pairs of a Subscribe that no manifest registers: their tasks cannot
    /// exist, most often because of a typo in the worker's kind or version, or a manifest not
    /// applied yet. The cache answers for the usual subscriber; a miss is confirmed with the
    /// database (the cache may not have heard of a manifest applied a moment ago).
    async fn warn_unknown_kinds(&self, sid: StreamId, name: &str, pairs: &[KindPair]) {
        let manifests = &self.inner.parts.manifests;
        if pairs.iter().all(|p| manifests.get(p).is_some()) {
            return;
        }
        let registered = match db::kinds::registered(&self.inner.pool).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "could not check a subscriber's kinds");
                return;
            }
        };
        let unknown: Vec<String> = pairs
            .iter()
            .filter(|p| !registered.contains(p))
            .map(KindPair::to_string)
            .collect();
        if !unknown.is_empty() {
            tracing::warn!(stream = sid, worker = %name, unknown = %unknown.join(", "), "worker subscribed for kinds that are not registered; it gets no tasks of them until a manifest is applied");
        }
    }

    /// `GetProviderConfig`: the current defaults of the caller's kinds.
    #[tracing::instrument(skip_all)]
    pub async fn get_provider_config(
        &self,
        req: Request<pb::GetProviderConfigRequest>,
    ) -> Result<Response<pb::GetProviderConfigResponse>, Status> {
        let principal = self.caller(&req)?;
        let req = req.into_inner();
        let pairs = pairs_from(
            &req.kinds,
            &req.kind_versions,
            self.inner.opts.max_kinds_per_stream,
        )?;
        authz::check_kinds(principal.as_deref(), &pairs)?;
        let entries = self
            .inner
            .parts
            .configs
            .defaults_for(&pairs)
            .await?
            .into_iter()
            .filter(|(_, c)| !(c.spec.is_empty() && c.bundle.is_empty()))
            .map(|(p, c)| pb::ProviderConfigEntry {
                kind: p.kind,
                kind_version: p.version,
                config: c.spec,
                bundle: c.bundle,
            })
            .collect();
        Ok(Response::new(pb::GetProviderConfigResponse { entries }))
    }
}

impl Workers {
    /// `ListDescendants`: one page of the live subtree of the composite whose reconcile
    /// lease the caller names. The lease is the authority: a worker reads the subtree of a
    /// task it holds, of a kind its principal may serve, and nothing else; a lease that is
    /// gone (the task finished, was reaped or superseded) is FAILED_PRECONDITION.
    ///
    /// A unary call names no stream, so "the stream that holds the lease" is judged by who
    /// calls from where: a lease this broker handed to a stream of another principal, or to
    /// a stream whose worker connects from another address (another host or pod), is
    /// PERMISSION_DENIED (logged with both principals, counted in
    /// `converge_broker_lease_refusals_total`). Two workers of one principal on one address
    /// cannot be told apart here; each SDK pages on the connection its task came on.
    #[tracing::instrument(skip_all)]
    pub async fn list_descendants(
        &self,
        req: Request<pb::ListDescendantsRequest>,
    ) -> Result<Response<pb::ListDescendantsResponse>, Status> {
        let principal = self.caller(&req)?;
        let from = peer_of(&req)
            .map(|p| p.remote_addr)
            .or_else(|| req.remote_addr());
        let req = req.into_inner();
        let id = uuid::Uuid::from_slice(&req.resource_id)
            .map_err(|_| Status::invalid_argument("resource_id must be 16 bytes"))?;
        let token = uuid::Uuid::parse_str(&req.lease_token)
            .map_err(|_| Status::invalid_argument("lease_token is not a lease token"))?;
        let after = match req.page_token.as_slice() {
            [] => None,
            t => Some(
                descendants::Cursor::decode(t)
                    .ok_or_else(|| Status::invalid_argument("page_token was not made here"))?,
            ),
        };
        if let Some(h) = self.inner.parts.registry.holder_of(LeaseToken(token))
            && !pages_for(&h, principal.as_deref(), from)
        {
            tracing::warn!(lease = %token, holder = h.principal.as_deref().unwrap_or("-"), holder_stream = h.stream, holder_peer = ?h.peer, sender = authz::name_of(principal.as_deref()), sender_peer = ?from, "refused ListDescendants for a lease another worker's stream holds");
            metrics().lease_refused(LeaseUse::ListDescendants, Refused::OtherStream, 1);
            return Err(Status::permission_denied(
                "the lease is held by another worker's stream: page with the lease of a task \
                 this worker runs",
            ));
        }
        let pool = &self.inner.pool;
        let leased = descendants::leased_composite(pool, id, token, req.claim_epoch)
            .await
            .map_err(|e| Status::unavailable(format!("reading the lease failed: {e}")))?
            .ok_or_else(|| {
                Status::failed_precondition("the lease is no longer current (task ended)")
            })?;
        authz::check_kinds(
            principal.as_deref(),
            &[KindPair::new(&leased.kind, leased.kind_version)],
        )
        .inspect_err(|_| {
            metrics().lease_refused(LeaseUse::ListDescendants, Refused::Kind, 1);
        })?;
        let size = match req.page_size {
            0 => descendants::DEFAULT_PAGE,
            n => n.min(descendants::MAX_PAGE),
        };
        let (rows, next) = descendants::page(pool, id, leased.root_id, after, size)
            .await
            .map_err(|e| Status::unavailable(format!("reading descendants failed: {e}")))?;
        Ok(Response::new(pb::ListDescendantsResponse {
            descendants: rows.into_iter().map(convert::related_resource).collect(),
            next_page_token: next.map(|c| c.encode()).unwrap_or_default(),
        }))
    }
}

/// The connection a request came on, as the listener describes it.
fn peer_of<T>(req: &Request<T>) -> Option<&PeerInfo> {
    req.extensions().get::<PeerInfo>()
}

/// Whether a ListDescendants caller (`principal`, from `from`) may page with a lease that
/// `holder` holds: the same principal, and the same address when both are known.
fn pages_for(holder: &Holder, principal: Option<&Principal>, from: Option<SocketAddr>) -> bool {
    let same_principal = holder.principal.as_deref() == principal.map(|p| p.name.as_str());
    let same_host = match (holder.peer, from) {
        (Some(h), Some(f)) => h.ip() == f.ip(),
        _ => true,
    };
    same_principal && same_host
}

/// One subscribed stream as its session sees it.
struct Subscribed {
    sid: StreamId,
    /// Ends the stream from the broker's side (stalled queue, revoked principal, bad frame).
    closer: Closer,
    pairs: Vec<KindPair>,
}

/// One stream's life after Subscribe: adopt resumed leases, prime configs, then serve frames
/// until the stream ends (or its principal leaves AUTH_FILE, or it stalls), and finally
/// release every lease still held (rule 8).
async fn session(
    w: Workers,
    stream: Subscribed,
    mut inbound: Streaming<pb::WorkStreamClientMsg>,
    resumed: Vec<(LeaseToken, ClaimEpoch)>,
    principal: Option<Arc<Principal>>,
) {
    let Subscribed { sid, closer, pairs } = stream;
    let (pool, parts) = (&w.inner.pool, &w.inner.parts);
    if !resumed.is_empty() {
        adopt_resumed(&w, sid, &resumed, principal.as_deref()).await;
    }
    // Rule 2 holds or the stream ends: without its configs a worker would run tasks blind,
    // so a failed prime closes the stream and the worker reconnects (with backoff).
    match parts.configs.prime_stream(sid, &pairs).await {
        // Claimable now: its tasks (and plans' dry runs) may be waiting.
        Ok(()) => {
            parts.dispatch.wake();
            parts.dry_runs.wake();
        }
        Err(e) => {
            tracing::warn!(error = %e, stream = sid, "could not prime provider configs; closing the stream");
            closer.close(Status::unavailable(
                "the broker could not load this stream's provider configs; reconnect",
            ));
        }
    }
    // Revocation is an event: the authenticator's generation moves within milliseconds of
    // an AUTH_FILE change or an API token's revoke (its NOTIFY) or expiry, and the stream
    // re-checks its principal then. Checked once after
    // subscribing too: a reload between the stream's authentication and the subscription
    // would otherwise go unseen.
    let auth = w.inner.opts.auth.clone().zip(principal.clone());
    let mut changes = auth.as_ref().map(|(a, _)| a.subscribe());
    let revoked = |a: &converge_auth::Authenticator, p: &Principal| {
        (!a.still_valid(p)).then(|| {
            let why = if p.token_id.is_some() {
                "its API token was revoked or expired"
            } else {
                "it was removed or changed in AUTH_FILE"
            };
            Status::unauthenticated(format!("principal {:?}: {why}", p.name))
        })
    };
    if let Some(status) = auth.as_ref().and_then(|(a, p)| revoked(a, p)) {
        closer.close(status);
    }
    let end = loop {
        let next = tokio::select! {
            m = inbound.message() => m,
            _ = closer.closed() => break closer.reason(),
            changed = async { changes.as_mut().expect("guarded by the select condition").changed().await }, if changes.is_some() => {
                if changed.is_err() {
                    // The authenticator is gone (the process is stopping): nothing to watch.
                    changes = None;
                    continue;
                }
                let (a, p) = auth.as_ref().expect("a subscription implies authentication");
                if let Some(status) = revoked(a, p) {
                    closer.close(status);
                    break "principal revoked".to_string();
                }
                continue;
            }
        };
        match next {
            Ok(Some(msg)) => {
                parts.registry.heard_from(sid, tokio::time::Instant::now());
                if let Err(status) = handle(&w, sid, &pairs, principal.as_ref(), msg).await {
                    let end = format!("protocol error: {}", status.message());
                    closer.close(status);
                    break end;
                }
            }
            Ok(None) => break "closed by worker".to_string(),
            Err(s) => {
                if let Some(status) = wire::oversized(&s, w.inner.opts.max_message_bytes) {
                    closer.close(status);
                }
                break format!("transport: {}", s.message());
            }
        }
    };
    let held = parts.registry.remove_stream(sid);
    parts.dry_runs.stream_ended(sid).await;
    let n = held.len();
    if n > 0
        && let Err(e) = db::queue::lease_release(pool, &held).await
    {
        tracing::error!(error = %e, stream = sid, "could not release leases of an ended stream; the reaper will");
    }
    tracing::info!(stream = sid, released = n, reason = %end, "worker stream ended");
    parts.dispatch.wake();
}

/// Takes over the leases a reconnected worker lists in `Subscribe.resumed`, as far as they
/// are its own: a lease of a kind its principal may not serve, or that another principal's
/// stream of this broker holds, is refused (logged with both principals, counted) and left
/// as it is; the worker's held result for it is then refused as unknown.
async fn adopt_resumed(
    w: &Workers,
    sid: StreamId,
    resumed: &[(LeaseToken, ClaimEpoch)],
    principal: Option<&Principal>,
) {
    let (pool, parts) = (&w.inner.pool, &w.inner.parts);
    let found = match db::queue::lease_lookup(pool, resumed).await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(error = %e, "could not look up resumed leases");
            return;
        }
    };
    let sender = authz::name_of(principal);
    let mut allowed = Vec::with_capacity(found.len());
    let (mut other_kind, mut other_stream) = (0u64, 0u64);
    for f in found {
        let token = f.key.lease_token;
        if !authz::may_serve(principal, &f.pair.kind) {
            tracing::warn!(stream = sid, lease = %token, kind = %f.pair.kind, sender, "refused to resume a lease of a kind the worker's principal may not serve");
            other_kind += 1;
        } else if let Some(h) =
            parts
                .registry
                .resume_refused(token, sid, principal.map(|p| p.name.as_str()))
        {
            tracing::warn!(stream = sid, lease = %token, sender, holder = h.principal.as_deref().unwrap_or("-"), holder_stream = h.stream, "refused to resume a lease another principal's stream holds");
            other_stream += 1;
        } else {
            allowed.push((token, f.key.claim_epoch));
        }
    }
    for (n, why) in [
        (other_kind, Refused::Kind),
        (other_stream, Refused::OtherStream),
    ] {
        if n > 0 {
            metrics().lease_refused(LeaseUse::Resume, why, n);
        }
    }
    if allowed.is_empty() {
        return;
    }
    match db::queue::lease_adopt(pool, &allowed, &w.inner.opts.broker_id).await {
        Ok(found) => {
            // A composite's held stage result cannot finish its task without the pipeline
            // that sent the stage (taken as final, its compose was never applied and its
            // rollup never ran): such tasks are released to run again, and the held result
            // is refused when it arrives.
            let (keys, rerun): (Vec<_>, Vec<_>) = found.into_iter().partition(|f| {
                parts
                    .manifests
                    .final_stage(f.key.task_type, &f.pair)
                    .is_some()
            });
            tracing::info!(
                stream = sid,
                resumed = resumed.len(),
                adopted = keys.len(),
                rerun = rerun.len(),
                refused = other_kind + other_stream,
                "adopting resumed leases"
            );
            parts.registry.adopt(sid, keys);
            let rerun: Vec<_> = rerun.into_iter().map(|f| f.key).collect();
            if let Err(e) = db::queue::lease_release(pool, &rerun).await {
                tracing::warn!(error = %e, "could not release resumed composite leases; the reaper will");
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not adopt resumed leases"),
    }
}

/// How the worker says its task ended.
fn task_result(c: &pb::StageComplete) -> TaskResult {
    match (c.error_message.is_empty(), c.terminal) {
        (true, _) => TaskResult::Ok,
        (false, true) => TaskResult::Terminal,
        (false, false) => TaskResult::Error,
    }
}

/// Logs and counts a frame's use of leases another stream holds (the frame changes nothing
/// for them).
fn refuse_elsewhere(
    sid: StreamId,
    sender: Option<&Arc<Principal>>,
    frame: LeaseUse,
    holders: &[(LeaseToken, Holder)],
) {
    let Some((lease, h)) = holders.first() else {
        return;
    };
    tracing::warn!(
        stream = sid,
        sender = authz::name_of(sender.map(|p| &**p)),
        holder = h.principal.as_deref().unwrap_or("-"),
        holder_stream = h.stream,
        %lease,
        count = holders.len(),
        frame = frame.as_str(),
        "refused a worker's use of a lease another stream holds"
    );
    metrics().lease_refused(frame, Refused::OtherStream, holders.len() as u64);
}

async fn handle(
    w: &Workers,
    sid: StreamId,
    pairs: &[KindPair],
    principal: Option<&Arc<Principal>>,
    msg: pb::WorkStreamClientMsg,
) -> Result<(), Status> {
    let parts = &w.inner.parts;
    match msg.body {
        None => return Err(Status::invalid_argument("frame without a body")),
        Some(In::Subscribe(_)) => {
            tracing::debug!(stream = sid, "ignoring a second Subscribe");
        }
        Some(In::Complete(c)) => {
            let token = parse_token(&c.lease_token).ok_or_else(|| {
                Status::invalid_argument("StageComplete.lease_token is not a lease token")
            })?;
            let epoch = ClaimEpoch(c.claim_epoch);
            // A dry run's answer goes back to its plan and nowhere else; one sent to another
            // stream is not this stream's to give.
            match parts.dry_runs.take(token, epoch, sid) {
                Taken::No => {}
                Taken::Here(flight) => {
                    parts.registry.ack(sid, token, epoch, true);
                    let dry_runs = Arc::clone(&parts.dry_runs);
                    tokio::spawn(async move { dry_runs.answer(flight, c).await });
                    return Ok(());
                }
                Taken::Elsewhere => {
                    tracing::warn!(stream = sid, lease = %token, sender = authz::name_of(principal.map(|p| &**p)), "refused a dry-run answer for a dry run another stream was sent");
                    metrics().lease_refused(LeaseUse::Complete, Refused::OtherStream, 1);
                    parts.registry.ack(sid, token, epoch, false);
                    return Ok(());
                }
            }
            match parts.registry.take_result(token, epoch, sid) {
                Held::Here(mut f) => {
                    if let Some(t) = f.timer.take() {
                        t.abort();
                    }
                    // An adopted lease's stage is unknown here; the worker's echo says it.
                    let stage = if f.stage != 0 { f.stage } else { c.stage };
                    metrics().task_ended(
                        &f.pair.kind,
                        convert::stage_word(stage),
                        task_result(&c),
                        f.sent,
                    );
                    parts.dispatch.wake();
                    if f.pipeline.is_some() {
                        let h = parts.handout.clone();
                        // No worker holds the task from here to its next stage, and while
                        // this loop waits for the budget none of this stream's heartbeats
                        // is read: the broker refreshes those leases meanwhile.
                        let held = h.keep_alive(f.key.clone());
                        let waiting = h.keep_stream_alive(sid);
                        let (share, c) = budget_share(&w.inner.stage_budget, c).await;
                        drop(waiting);
                        let Some(c) = c else {
                            // Unreachable in practice (see budget_share): the lease is left to
                            // its deadline and the task runs again.
                            return Ok(());
                        };
                        tokio::spawn(async move {
                            h.stage_result(f, c, sid).await;
                            drop(share);
                            drop(held);
                        });
                    } else {
                        let completion = parts
                            .manifests
                            .enforce(
                                &f.pair,
                                f.verb.as_deref(),
                                convert::completion(f.key, f.stage, &c),
                            )
                            .await;
                        parts.completions.submit(Job::Known {
                            completion,
                            reply: Some(sid),
                        });
                    }
                }
                // Another stream holds it: the result is not this stream's to give. Nothing
                // changes (the holder's slot, timer and pipeline stay), and the holder's own
                // result is still taken when it comes.
                Held::Elsewhere(holder) => {
                    refuse_elsewhere(sid, principal, LeaseUse::Complete, &[(token, holder)]);
                    parts.registry.ack(sid, token, epoch, false);
                }
                Held::Unknown => parts.completions.submit(Job::Unknown {
                    token,
                    epoch,
                    msg: c,
                    reply: sid,
                    principal: principal.cloned(),
                }),
            }
        }
        Some(In::Interest(i)) => {
            let pair = KindPair::new(i.kind, i.kind_version);
            if pairs.contains(&pair) {
                tracing::info!(stream = sid, %pair, ready = i.has_worker, "worker readiness changed");
                parts.registry.set_ready(sid, pair, i.has_worker);
                parts.dispatch.wake();
                parts.dry_runs.wake();
            }
        }
        Some(In::Heartbeat(h)) => {
            if h.lease_token.len() != h.claim_epoch.len() {
                return Err(Status::invalid_argument(
                    "WorkHeartbeat.lease_token and claim_epoch must have the same length",
                ));
            }
            let leases: Vec<_> = h
                .lease_token
                .iter()
                .zip(&h.claim_epoch)
                .filter_map(|(t, e)| parse_token(t).map(|t| (t, ClaimEpoch(*e))))
                .collect();
            // Only the stream's own leases are refreshed: an entry for a lease another
            // stream holds would keep alive a task this worker does not run.
            let (keys, elsewhere) = parts.registry.keys_for(sid, &leases);
            refuse_elsewhere(sid, principal, LeaseUse::Heartbeat, &elsewhere);
            if let Err(e) = db::queue::lease_heartbeat(&w.inner.pool, &keys).await {
                tracing::warn!(error = %e, "heartbeat refresh failed");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compose result of `n` children with a spec each, as a worker sends it.
    fn compose_result(n: usize) -> pb::StageComplete {
        pb::StageComplete {
            lease_token: "00000000-0000-0000-0000-000000000001".into(),
            stage: pb::Stage::Compose as i32,
            compose: Some(pb::ComposeResult {
                desired: (0..n)
                    .map(|i| pb::ChildSpec {
                        kind: "node".into(),
                        name: format!("node-{i}"),
                        spec: format!("{{\"i\": {i}}}").into_bytes(),
                        kind_version: 1,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A large result that has to wait for its share waits (it is not handed on while the
    /// budget is held) and comes back whole once the share is granted, with the share sized
    /// to it; one the budget has room for goes on at once.
    #[tokio::test]
    async fn a_stage_result_waiting_for_its_share_comes_back_whole() {
        let budget = Arc::new(Semaphore::new(STAGE_RESULT_BUDGET));
        let big = compose_result(20_000);
        let size = big.encoded_len();
        assert!(
            size > WAIT_ENCODED_OVER && size < STAGE_RESULT_BUDGET,
            "{size}"
        );

        let (share, got) = budget_share(&budget, big.clone()).await;
        assert_eq!(
            got.as_ref(),
            Some(&big),
            "room in the budget: handed on as it is"
        );
        assert_eq!(share.num_permits(), size);

        // The rest of the budget is held too: the next one waits, encoded, until the first
        // share is dropped.
        let rest = Arc::clone(&budget)
            .acquire_many_owned(u32::try_from(STAGE_RESULT_BUDGET - size).unwrap())
            .await
            .unwrap();
        let waiting = tokio::spawn({
            let budget = Arc::clone(&budget);
            let big = big.clone();
            async move { budget_share(&budget, big).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "it waits while the budget is held");
        drop(share);
        let (share, got) = waiting.await.unwrap();
        assert_eq!(got, Some(big), "decoded again, whole");
        assert_eq!(share.num_permits(), size);

        // Larger than the whole budget: it takes all of it.
        let huge = compose_result(300_000);
        drop((share, rest));
        assert!(huge.encoded_len() > STAGE_RESULT_BUDGET);
        let (share, got) = budget_share(&budget, huge.clone()).await;
        assert_eq!(share.num_permits(), STAGE_RESULT_BUDGET);
        assert_eq!(got, Some(huge));
    }
}
