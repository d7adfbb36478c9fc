//! The broker's in-memory view of its connected streams and the leases it handed out.
//!
//! One mutex guards both maps so a task's slot, its stream and its lease always agree; no
//! await happens under it (frames are queued with `try_send`).
//!
//! No stream can block another: a frame that finds a stream's queue full is handed to a task
//! of its own that waits at most [`STALL_LIMIT`]; a stream that leaves it unread that long is
//! closed (its session ends and releases its leases), so a client that subscribes and stops
//! reading costs one bounded queue, never a stalled config push or dispatch.
//!
//! It keeps `converge_broker_streams` and `converge_broker_inflight` as streams and leases
//! enter and leave its maps, under the same lock, so a scrape reads two gauges instead of
//! walking the maps.
//!
//! A lease belongs to the stream it was handed to (or that adopted it on resume): a result,
//! a heartbeat entry or a resume from another stream finds it [`Held::Elsewhere`] and changes
//! nothing ([`Registry::take_result`], [`Registry::keys_for`], [`Registry::adopt`]).
//!
//! A stream one of whose tasks hit its broker-side deadline is *suspect*: it is handed no new
//! task until its peer was heard from after that deadline (see [`Registry::suspect`]), so a
//! hung-but-connected worker never gets the retry of the task it hung on.
//!
//! Tasks a claim took ahead of free slots wait here, per (kind, version), until a slot of
//! theirs frees ([`Registry::assign_or_hold`], [`Registry::take_ahead`]); see
//! [`crate::ahead`] for why and how many.
//!
//! A low part: it knows streams, leases and frames, and keeps a composite's [`Pipeline`]
//! with its lease between stages, but never runs one, claims, or writes to the database. It
//! is also the broker's [`Roster`]: the membership loop publishes its streams as the
//! connected workers.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::Stream;
use tokio::{
    sync::{
        Notify,
        mpsc::{
            self,
            error::{SendTimeoutError, TrySendError},
        },
    },
    task::AbortHandle,
};
use tokio_util::sync::CancellationToken;
use tonic::Status;
use uuid::Uuid;

use converge_auth::listen::ConnActivity;
use converge_proto::pb::{self, work_stream_server_msg::Body};

use converge_engine::{
    db::{
        cluster::{ServedKind, WorkerInfo},
        queue::{FoundLease, LeaseKey},
    },
    ids::{ClaimEpoch, KindPair, LeaseToken},
    membership::Roster,
    metrics::metrics,
};

use crate::pipeline::Pipeline;

/// Outbound frames of one stream.
type StreamTx = mpsc::Sender<Result<pb::WorkStreamServerMsg, Status>>;

/// Identifies a stream within this broker.
pub(crate) type StreamId = u64;

/// Longest a frame may wait for room in a stream's queue before the stream is closed as
/// stalled. Long enough for a busy worker's GC pause or a slow link, short enough that a
/// stalled peer's leases come back within seconds.
pub(crate) const STALL_LIMIT: Duration = Duration::from_secs(10);

/// The response stream tonic sends to one worker.
pub(crate) type Outbound =
    Pin<Box<dyn Stream<Item = Result<pb::WorkStreamServerMsg, Status>> + Send + 'static>>;

/// Ends one stream from the broker's side with a status (stalled, revoked, protocol error).
#[derive(Clone, Default)]
pub(crate) struct Closer {
    token: CancellationToken,
    status: Arc<OnceLock<Status>>,
}

impl Closer {
    /// Closes the stream with `status` (the first reason given wins).
    pub fn close(&self, status: Status) {
        let _ = self.status.set(status);
        self.token.cancel();
    }

    /// Resolves once the stream was closed.
    pub async fn closed(&self) {
        self.token.cancelled().await
    }

    /// Why the stream was closed.
    pub fn reason(&self) -> String {
        self.status
            .get()
            .map(|s| s.message().to_string())
            .unwrap_or_default()
    }

    fn status(&self) -> Status {
        self.status
            .get()
            .cloned()
            .unwrap_or_else(|| Status::unavailable("the broker closed the stream"))
    }
}

/// The sending half of one stream: frames go in without ever awaiting under a lock.
#[derive(Clone)]
pub(crate) struct StreamOut {
    tx: StreamTx,
    closer: Closer,
}

impl StreamOut {
    /// A stream's queue of `capacity` frames, and the response stream that drains it (it ends
    /// with the close status as soon as the stream is closed; queued frames are dropped).
    pub fn new(capacity: usize) -> (StreamOut, Outbound) {
        let (tx, rx) = mpsc::channel(capacity);
        let closer = Closer::default();
        let out = StreamOut {
            tx,
            closer: closer.clone(),
        };
        let stream = futures::stream::unfold(Some((rx, closer)), |state| async move {
            let (mut rx, closer) = state?;
            tokio::select! {
                biased;
                _ = closer.closed() => Some((Err(closer.status()), None)),
                m = rx.recv() => m.map(|m| (m, Some((rx, closer)))),
            }
        });
        (out, Box::pin(stream))
    }

    /// The stream's closer.
    pub fn closer(&self) -> &Closer {
        &self.closer
    }

    /// Queues a frame now if there is room; hands it back if the queue is full (a frame for
    /// a closed stream is dropped).
    fn try_push(&self, body: Body) -> Option<Body> {
        let frame = Ok(pb::WorkStreamServerMsg { body: Some(body) });
        match self.tx.try_send(frame) {
            Ok(()) | Err(TrySendError::Closed(_)) | Err(TrySendError::Full(Err(_))) => None,
            Err(TrySendError::Full(Ok(f))) => f.body,
        }
    }

    /// Queues a frame that must not be dropped: at once if there is room, else from a task
    /// of its own that closes the stream if the frame still finds no room after
    /// [`STALL_LIMIT`].
    pub fn push(&self, body: Body) {
        if self.closer.token.is_cancelled() {
            return;
        }
        let Some(body) = self.try_push(body) else {
            return;
        };
        let (tx, closer) = (self.tx.clone(), self.closer.clone());
        tokio::spawn(async move {
            let frame = Ok(pb::WorkStreamServerMsg { body: Some(body) });
            tokio::select! {
                _ = closer.closed() => {}
                r = tx.send_timeout(frame, STALL_LIMIT) => {
                    if let Err(SendTimeoutError::Timeout(_)) = r {
                        closer.close(Status::resource_exhausted(format!(
                            "the worker left its stream unread for {} s; the broker closed it \
                             and released its tasks",
                            STALL_LIMIT.as_secs()
                        )));
                    }
                }
            }
        });
    }
}

/// Who a stream's worker says it is (shown in the cluster list; never trusted).
pub(crate) struct WorkerIdentity {
    /// `Subscribe.worker_name`, cut to 128 characters.
    pub name: String,
    /// `Subscribe.sdk`, cut to 64 characters.
    pub sdk: String,
    /// The authenticated principal, if authentication is on.
    pub principal: Option<String>,
    /// The peer address.
    pub peer: Option<SocketAddr>,
    /// When it subscribed.
    pub connected_at: chrono::DateTime<chrono::Utc>,
}

/// One subscribed stream as the registry keeps it.
pub(crate) struct StreamEntry {
    /// Where its frames go.
    pub out: StreamOut,
    /// Who the worker is.
    pub who: WorkerIdentity,
    /// The (kind, version) pairs it subscribed for.
    pub pairs: HashSet<KindPair>,
    /// Pairs whose worker said it cannot take tasks right now.
    pub unready: HashSet<KindPair>,
    /// Most tasks it may hold at once.
    pub max_inflight: usize,
    /// Tasks it holds now.
    pub inflight: usize,
    /// False until the default configs were pushed (rule 2: config before any task).
    pub claimable: bool,
    /// Set once the broker sent `Drain`: no more tasks.
    pub draining: bool,
    /// What its connection's reads say about the peer (`None` off a guarded listener).
    pub activity: Option<ConnActivity>,
    /// The last broker-side deadline one of its tasks hit, until the peer was heard from
    /// after it (see [`Registry::suspect`]).
    pub suspect_since: Option<tokio::time::Instant>,
    /// Its worker answers dry-run compose tasks (`Subscribe.dry_runs`).
    pub dry_runs: bool,
}

impl StreamEntry {
    fn free_for(&self, pair: &KindPair) -> usize {
        if !self.usable_for(pair) {
            return 0;
        }
        self.max_inflight.saturating_sub(self.inflight)
    }

    /// Whether the stream may be handed a task of `pair` now, slots aside.
    fn usable_for(&self, pair: &KindPair) -> bool {
        self.claimable
            && !self.draining
            && self.pairs.contains(pair)
            && !self.unready.contains(pair)
            && !self.is_suspect()
    }

    /// A deadline passed on this stream and nothing came from its peer since: its
    /// connection read no byte (no frame, no PONG to the broker's HTTP/2 PING) after it.
    fn is_suspect(&self) -> bool {
        self.suspect_since
            .is_some_and(|t| !self.activity.as_ref().is_some_and(|a| a.heard_since(t)))
    }

    fn holder(&self, stream: StreamId) -> Holder {
        Holder {
            stream,
            principal: self.who.principal.clone(),
            peer: self.who.peer,
        }
    }
}

/// The stream holding a lease another stream named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Holder {
    /// The holding stream.
    pub stream: StreamId,
    /// Its principal (`None`: authentication is off).
    pub principal: Option<String>,
    /// Its peer's address.
    pub peer: Option<SocketAddr>,
}

/// Where a lease named by a stream's frame is held, as [`Registry::take_result`] found it.
pub(crate) enum Held {
    /// By that very stream, at that epoch: taken out of flight for its result.
    Here(Inflight),
    /// By another stream of this broker (at any epoch): refused, nothing changed.
    Elsewhere(Holder),
    /// Not by this broker at that epoch (resent after a reconnect, or stale).
    Unknown,
}

/// A lease this broker handed out and has no result for yet.
pub(crate) struct Inflight {
    /// The claim.
    pub key: LeaseKey,
    /// Its kind and version (the kind is the `kind` label of the task's metrics; the pair
    /// picks the status_schema its result is checked against).
    pub pair: KindPair,
    /// When it was handed to the stream (`None` for an adopted lease: unknown).
    pub sent: Option<Instant>,
    /// The stream running it.
    pub stream: StreamId,
    /// The stage sent (`0` for an adopted lease: unknown).
    pub stage: i32,
    /// The spec generation the task runs for (`None` for an adopted lease: unknown).
    pub generation: Option<i64>,
    /// An operation's verb (its output is checked against the verb's `output_schema`).
    pub verb: Option<String>,
    /// The broker-side deadline, aborted when the result arrives.
    pub timer: Option<AbortHandle>,
    /// Set for composite pipelines (compose/work/rollup under one lease).
    pub pipeline: Option<Box<Pipeline>>,
}

/// A task ready to hand to a stream.
pub(crate) struct Outgoing {
    /// The claim.
    pub key: LeaseKey,
    /// Its (kind, version): only streams serving it may take it.
    pub pair: KindPair,
    /// The stage sent.
    pub stage: i32,
    /// The frame.
    pub msg: pb::StageTask,
    /// The broker-side deadline to arm once placed (`None`: none).
    pub deadline: Option<Duration>,
    /// A composite's pipeline, kept with the lease until the stage's result comes back.
    pub pipeline: Option<Box<Pipeline>>,
}

/// A task claimed ahead of a free slot, waiting in the broker for one.
struct Ahead {
    task: Outgoing,
    /// When it started waiting (its lease's heartbeat is the claim's).
    since: Instant,
}

#[derive(Default)]
struct State {
    next_id: StreamId,
    streams: HashMap<StreamId, StreamEntry>,
    inflight: HashMap<Uuid, Inflight>,
    /// Tasks claimed ahead of free slots, oldest first, per pair.
    ahead: HashMap<KindPair, VecDeque<Ahead>>,
    /// Revoked tokens that were not in flight when their notice came (see
    /// [`Registry::revoke`]), with their arrival order for eviction; at most
    /// [`REVOKED_KEPT`] each.
    revoked: HashSet<Uuid>,
    revoked_order: VecDeque<Uuid>,
}

impl State {
    /// Whether a stream could take a task of `pair` once it has a free slot.
    fn serves(&self, pair: &KindPair) -> bool {
        self.streams.values().any(|e| e.usable_for(pair))
    }

    /// Takes `token` out of the in-flight set, freeing its stream's slot and its kind's
    /// gauge: the one way a lease leaves it with its task ended (result, deadline, revoke).
    fn take_inflight(&mut self, token: LeaseToken) -> Option<Inflight> {
        let f = self.inflight.remove(&token.0)?;
        if let Some(e) = self.streams.get_mut(&f.stream) {
            e.inflight = e.inflight.saturating_sub(1);
        }
        metrics().inflight_add(&f.pair.kind, -1);
        Some(f)
    }
}

/// How many revoked tokens not in flight the registry remembers. Every broker hears every
/// notice, so most are other brokers' leases; the ones that matter are this broker's leases
/// between a claim (or a composite's stage) and their placement, a window of milliseconds.
pub(crate) const REVOKED_KEPT: usize = 4096;

/// The connected streams and the leases handed out to them.
#[derive(Default)]
pub(crate) struct Registry {
    state: std::sync::Mutex<State>,
    /// Bumped when a stream comes, goes or flips readiness (see [`Roster::generation`]).
    generation: AtomicU64,
    /// Woken with each bump.
    changed: Arc<Notify>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("registry lock poisoned")
    }

    /// The set of streams changed: the membership loop republishes them.
    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.changed.notify_one();
    }

    /// Registers a subscribed stream (not claimable until its configs were pushed).
    pub fn add_stream(&self, entry: StreamEntry) -> StreamId {
        let id = {
            let mut s = self.lock();
            s.next_id += 1;
            let id = s.next_id;
            s.streams.insert(id, entry);
            metrics().broker_streams.inc();
            id
        };
        self.bump();
        id
    }

    /// Lets the stream receive tasks (rule 2: its default configs went out first).
    pub fn set_claimable(&self, id: StreamId) {
        if let Some(e) = self.lock().streams.get_mut(&id) {
            e.claimable = true;
        }
    }

    /// Removes a stream and hands back every lease it still held (to be released).
    pub fn remove_stream(&self, id: StreamId) -> Vec<LeaseKey> {
        let held = {
            let mut s = self.lock();
            if s.streams.remove(&id).is_some() {
                metrics().broker_streams.dec();
            }
            let tokens: Vec<Uuid> = s
                .inflight
                .iter()
                .filter(|(_, f)| f.stream == id)
                .map(|(t, _)| *t)
                .collect();
            tokens
                .into_iter()
                .filter_map(|t| s.inflight.remove(&t))
                .map(Inflight::ended)
                .collect()
        };
        self.bump();
        held
    }

    /// Records whether the stream's worker can take tasks of `pair` right now.
    pub fn set_ready(&self, id: StreamId, pair: KindPair, ready: bool) {
        let flipped = match self.lock().streams.get_mut(&id) {
            Some(e) if ready => e.unready.remove(&pair),
            Some(e) => e.unready.insert(pair),
            None => false,
        };
        if flipped {
            self.bump();
        }
    }

    /// Pairs that at least one claimable, ready stream serves, with their total free slots.
    pub fn capacity(&self) -> Vec<(KindPair, usize)> {
        let s = self.lock();
        let mut out: HashMap<KindPair, usize> = HashMap::new();
        for e in s.streams.values() {
            for p in &e.pairs {
                let free = e.free_for(p);
                if free > 0 {
                    *out.entry(p.clone()).or_default() += free;
                }
            }
        }
        let mut v: Vec<_> = out.into_iter().collect();
        v.sort();
        v
    }

    /// Free slots for one pair right now.
    pub fn free_for(&self, pair: &KindPair) -> usize {
        self.lock().streams.values().map(|e| e.free_for(pair)).sum()
    }

    /// Hands each task to the ready stream with the most free slots for its pair. Returns
    /// the keys that found no stream (to be released, never failed) and, for each placed task
    /// with a deadline, what the caller must arm a timer for. A task whose lease was revoked
    /// before it could be placed (see [`Registry::revoke`]) is dropped: its row is gone or
    /// re-pointed, so there is nothing to run or release.
    pub fn assign(&self, tasks: Vec<Outgoing>) -> (Vec<LeaseKey>, Vec<(LeaseToken, Duration)>) {
        self.assign_with(tasks, false)
    }

    /// As [`Registry::assign`], but a task that finds every slot of its pair taken, while a
    /// stream still serves the pair, waits here for one ([`Registry::take_ahead`]) instead
    /// of going back to the queue: a claim taken ahead of free slots.
    pub fn assign_or_hold(
        &self,
        tasks: Vec<Outgoing>,
    ) -> (Vec<LeaseKey>, Vec<(LeaseToken, Duration)>) {
        self.assign_with(tasks, true)
    }

    fn assign_with(
        &self,
        tasks: Vec<Outgoing>,
        hold: bool,
    ) -> (Vec<LeaseKey>, Vec<(LeaseToken, Duration)>) {
        let mut s = self.lock();
        let mut unplaced = Vec::new();
        let mut placed = Vec::new();
        for t in tasks {
            if !s.revoked.is_empty() && s.revoked.remove(&t.key.lease_token.0) {
                tracing::debug!(lease = %t.key.lease_token, "lease revoked before its task was placed; dropped");
                continue;
            }
            let best = s
                .streams
                .iter()
                .map(|(id, e)| (*id, e.free_for(&t.pair)))
                .filter(|(_, f)| *f > 0)
                .max_by_key(|(_, f)| *f)
                .map(|(id, _)| id);
            let Some(sid) = best else {
                if hold && s.serves(&t.pair) {
                    s.ahead.entry(t.pair.clone()).or_default().push_back(Ahead {
                        task: t,
                        since: Instant::now(),
                    });
                } else {
                    unplaced.push(t.key);
                }
                continue;
            };
            let entry = s.streams.get_mut(&sid).expect("stream chosen above exists");
            // A task that finds no room goes back to the queue (a stall is caught by the
            // frames that must not be dropped).
            let generation = t.msg.generation;
            let verb = operation_verb(&t.msg);
            if entry.out.try_push(Body::Task(t.msg)).is_some() {
                unplaced.push(t.key);
                continue;
            }
            entry.inflight += 1;
            let token = t.key.lease_token;
            metrics().inflight_add(&t.pair.kind, 1);
            s.inflight.insert(
                token.0,
                Inflight {
                    key: t.key,
                    pair: t.pair,
                    sent: Some(Instant::now()),
                    stream: sid,
                    stage: t.stage,
                    generation: Some(generation),
                    verb,
                    timer: None,
                    pipeline: t.pipeline,
                },
            );
            if let Some(after) = t.deadline {
                placed.push((token, after));
            }
        }
        (unplaced, placed)
    }

    /// Takes up to `n` of `pair`'s tasks claimed ahead, oldest first, for placement. Each
    /// one's broker-side deadline is shortened by its wait, so it ends when the deadline the
    /// claim stamped on the task (`deadline_ms`) does.
    pub fn take_ahead(&self, pair: &KindPair, n: usize) -> Vec<Outgoing> {
        let mut s = self.lock();
        let Some(q) = s.ahead.get_mut(pair) else {
            return Vec::new();
        };
        let out = q
            .drain(..n.min(q.len()))
            .map(|a| {
                let mut t = a.task;
                let waited = a.since.elapsed();
                t.deadline = t.deadline.map(|d| d.saturating_sub(waited));
                t
            })
            .collect();
        if q.is_empty() {
            s.ahead.remove(pair);
        }
        out
    }

    /// How many of `pair`'s tasks wait for a slot.
    pub fn ahead_len(&self, pair: &KindPair) -> usize {
        self.lock().ahead.get(pair).map_or(0, VecDeque::len)
    }

    /// Takes out, for release, the tasks claimed ahead that waited too long: past `max_age`
    /// or a quarter of their deadline, or whose pair no stream serves any more.
    pub fn expire_ahead(&self, max_age: Duration) -> Vec<LeaseKey> {
        let mut s = self.lock();
        if s.ahead.is_empty() {
            return Vec::new();
        }
        let pairs: Vec<KindPair> = s.ahead.keys().cloned().collect();
        let mut out = Vec::new();
        for pair in pairs {
            let served = s.serves(&pair);
            let q = s.ahead.get_mut(&pair).expect("listed above");
            q.retain_mut(|a| {
                let age = a.since.elapsed();
                let stale =
                    !served || age > max_age || a.task.deadline.is_some_and(|d| age * 4 > d);
                if stale {
                    out.push(a.task.key.clone());
                }
                !stale
            });
            if q.is_empty() {
                s.ahead.remove(&pair);
            }
        }
        out
    }

    /// Takes out every task claimed ahead, for release (the broker drains).
    pub fn take_all_ahead(&self) -> Vec<LeaseKey> {
        self.lock()
            .ahead
            .drain()
            .flat_map(|(_, q)| q.into_iter().map(|a| a.task.key))
            .collect()
    }

    /// One of stream `id`'s tasks hit its broker-side deadline at `at`: the stream gets no
    /// new task until its peer is heard from after `at` (any byte on its connection: a
    /// frame, or the PONG to the broker's keepalive PING, which an idle connection gets
    /// within `KEEPALIVE_INTERVAL`), or [`Registry::clear_suspicion`] lifts it. A worker that
    /// hangs whole (SIGSTOP, a frozen VM) sends nothing, so the retry of the task it hung on,
    /// and every other task, goes to another stream until keepalive ends its connection.
    ///
    /// Guarantees: between `at` and a sign of life after it, [`Registry::capacity`] and
    /// [`Registry::assign`] count no slot of the stream. Caveat: the sign is per connection
    /// (through an L7 proxy the proxy answers PINGs, as it does for the keepalive itself).
    pub fn suspect(&self, id: StreamId, at: tokio::time::Instant) {
        if let Some(e) = self.lock().streams.get_mut(&id) {
            e.suspect_since = Some(e.suspect_since.map_or(at, |t| t.max(at)));
        }
    }

    /// Stream `id` sent a frame that arrived at `at`: a sign of life, clearing a suspicion
    /// from before it (for a stream whose connection's reads are not tracked).
    pub fn heard_from(&self, id: StreamId, at: tokio::time::Instant) {
        if let Some(e) = self.lock().streams.get_mut(&id)
            && e.suspect_since.is_some_and(|t| at > t)
        {
            e.suspect_since = None;
        }
    }

    /// Lifts the suspicion a deadline at `at` raised on stream `id`, if no later deadline
    /// replaced it: its connection outlived a whole keepalive round after `at`, so it
    /// answered a PING sent after it. True if the stream may take tasks again.
    pub fn clear_suspicion(&self, id: StreamId, at: tokio::time::Instant) -> bool {
        match self.lock().streams.get_mut(&id) {
            Some(e) if e.suspect_since == Some(at) => {
                e.suspect_since = None;
                true
            }
            _ => false,
        }
    }

    /// Attaches a lease's deadline timer (aborted at once if the lease is already gone, so
    /// a result that beat the timer's arming leaves no timer behind).
    pub fn set_timer(&self, token: LeaseToken, timer: AbortHandle) {
        match self.lock().inflight.get_mut(&token.0) {
            Some(f) => f.timer = Some(timer),
            None => timer.abort(),
        }
    }

    /// Takes a lease out of the in-flight set for a result stream `from` sent, if `from`
    /// holds it at that epoch, freeing the slot. A lease another stream holds is left as it
    /// is: the result belongs to the stream that holds the lease.
    pub fn take_result(&self, token: LeaseToken, epoch: ClaimEpoch, from: StreamId) -> Held {
        let mut s = self.lock();
        match s.inflight.get(&token.0) {
            Some(f) if f.stream != from => {
                let holder = f.stream;
                match s.streams.get(&holder) {
                    Some(e) => Held::Elsewhere(e.holder(holder)),
                    // A lease outlives its stream only between the stream's removal and
                    // its release: nobody holds it.
                    None => Held::Unknown,
                }
            }
            Some(f) if f.key.claim_epoch == epoch => match s.take_inflight(token) {
                Some(f) => Held::Here(f),
                None => Held::Unknown,
            },
            _ => Held::Unknown,
        }
    }

    /// The stream holding `token`, if this broker handed it out.
    pub fn holder_of(&self, token: LeaseToken) -> Option<Holder> {
        let s = self.lock();
        let f = s.inflight.get(&token.0)?;
        Some(s.streams.get(&f.stream)?.holder(f.stream))
    }

    /// Takes a lease out of the in-flight set (its deadline passed), freeing the stream's
    /// slot. `None` if this broker does not hold it at that epoch.
    fn take(&self, token: LeaseToken, epoch: ClaimEpoch) -> Option<Inflight> {
        let mut s = self.lock();
        match s.inflight.get(&token.0) {
            Some(f) if f.key.claim_epoch == epoch => {}
            _ => return None,
        }
        s.take_inflight(token)
    }

    /// Takes a lease out of the in-flight set whatever its epoch (its deadline passed).
    pub fn take_token(&self, token: LeaseToken) -> Option<Inflight> {
        let epoch = self.lock().inflight.get(&token.0)?.key.claim_epoch;
        self.take(token, epoch)
    }

    /// The engine took these leases away (`reason`: deleted, quarantined, superseded): each
    /// one this broker holds leaves the in-flight set (its slot frees, its deadline timer
    /// stops, a pipeline travelling with it is dropped) and its stream is sent `CancelTask`
    /// with the reason. Nothing is recorded: the queue row is gone or carries a newer epoch,
    /// so the worker's late result is refused like any stale one. One claimed ahead and still
    /// waiting for a slot is dropped unsent. Tokens this broker does not
    /// hold are remembered (the last [`REVOKED_KEPT`]), so that one of this broker's leases
    /// revoked between its claim (or a composite's previous stage) and its placement is
    /// dropped by [`Registry::assign`] instead of sent. Returns the taken leases.
    ///
    /// Guarantees: a lease is cancelled at most once, and never after its result was taken
    /// (both take it out of the map under the one lock).
    pub fn revoke(&self, tokens: &[LeaseToken], reason: &str) -> Vec<Inflight> {
        let mut s = self.lock();
        let mut out = Vec::new();
        let mut not_in_flight = HashSet::new();
        for t in tokens {
            let Some(mut f) = s.take_inflight(*t) else {
                not_in_flight.insert(t.0);
                continue;
            };
            if let Some(timer) = f.timer.take() {
                timer.abort();
            }
            if let Some(e) = s.streams.get_mut(&f.stream) {
                e.out.push(Body::Cancel(pb::CancelTask {
                    lease_token: t.to_string(),
                    claim_epoch: f.key.claim_epoch.0,
                    reason: reason.to_owned(),
                }));
            }
            out.push(f);
        }
        // Claimed ahead and still waiting: dropped, never sent (one pass over the waiting
        // tasks, whatever the notice's length: most of its tokens are other brokers').
        if !s.ahead.is_empty() && !not_in_flight.is_empty() {
            for q in s.ahead.values_mut() {
                q.retain(|a| !not_in_flight.remove(&a.task.key.lease_token.0));
            }
            s.ahead.retain(|_, q| !q.is_empty());
        }
        // The rest are remembered in the notice's order (the oldest are forgotten first).
        for t in tokens.iter().filter(|t| not_in_flight.remove(&t.0)) {
            if s.revoked_order.len() == REVOKED_KEPT
                && let Some(old) = s.revoked_order.pop_front()
            {
                s.revoked.remove(&old);
            }
            s.revoked_order.push_back(t.0);
            s.revoked.insert(t.0);
        }
        out
    }

    /// The queue leases in flight whose task's generation is known (not reactor deliveries,
    /// not adopted leases), with that generation: what the revocation failsafe re-checks.
    pub fn revocable(&self) -> Vec<(LeaseKey, i64)> {
        self.lock()
            .inflight
            .values()
            .filter(|f| f.key.task_type.is_queued())
            .filter_map(|f| Some((f.key.clone(), f.generation?)))
            .collect()
    }

    /// The keys of the given leases that stream `from` holds at the stated epochs (for
    /// heartbeat attestation), and the holders of those another stream holds (ignored).
    pub fn keys_for(
        &self,
        from: StreamId,
        leases: &[(LeaseToken, ClaimEpoch)],
    ) -> (Vec<LeaseKey>, Vec<(LeaseToken, Holder)>) {
        let s = self.lock();
        let mut keys = Vec::with_capacity(leases.len());
        let mut elsewhere = Vec::new();
        for (t, e) in leases {
            let Some(f) = s.inflight.get(&t.0) else {
                continue;
            };
            if f.stream != from {
                if let Some(h) = s.streams.get(&f.stream) {
                    elsewhere.push((*t, h.holder(f.stream)));
                }
            } else if f.key.claim_epoch == *e {
                keys.push(f.key.clone());
            }
        }
        (keys, elsewhere)
    }

    /// Whether a worker resuming on stream `to` with `principal` may take over `token`: not
    /// if another stream of this broker holds it under another principal (that stream's
    /// holder is returned). A lease held under the same principal moves with
    /// [`Registry::adopt`]: the worker reconnected before this broker saw its old stream end.
    pub fn resume_refused(
        &self,
        token: LeaseToken,
        to: StreamId,
        principal: Option<&str>,
    ) -> Option<Holder> {
        let h = self.holder_of(token)?;
        (h.stream != to && h.principal.as_deref() != principal).then_some(h)
    }

    /// Adopts leases found in the database for a resumed stream (a worker that reconnected
    /// to this broker while still running tasks another session handed out). A lease another
    /// stream of this broker still holds moves to `stream` (the caller refused those of
    /// another principal, see [`Registry::resume_refused`]): the worker's old stream is gone
    /// from its side, and its held result must be taken on the new one.
    pub fn adopt(&self, stream: StreamId, found: Vec<FoundLease>) {
        let mut s = self.lock();
        let mut n = 0;
        for FoundLease { key: k, pair, verb } in found {
            if let Some(f) = s.inflight.get_mut(&k.lease_token.0) {
                let old = f.stream;
                if old == stream {
                    continue;
                }
                f.stream = stream;
                if let Some(e) = s.streams.get_mut(&old) {
                    e.inflight = e.inflight.saturating_sub(1);
                }
                n += 1;
                continue;
            }
            metrics().inflight_add(&pair.kind, 1);
            s.inflight.insert(
                k.lease_token.0,
                Inflight {
                    key: k,
                    pair,
                    sent: None,
                    stream,
                    stage: 0,
                    generation: None,
                    verb,
                    timer: None,
                    pipeline: None,
                },
            );
            n += 1;
        }
        if let Some(e) = s.streams.get_mut(&stream) {
            e.inflight += n;
        }
    }

    /// Queues a frame that must not be dropped on one stream (see [`StreamOut::push`]);
    /// nothing happens if the stream is gone.
    pub fn push(&self, stream: StreamId, body: Body) {
        if let Some(e) = self.lock().streams.get(&stream) {
            e.out.push(body);
        }
    }

    /// Tells a worker whether its result for a lease was recorded (`accepted`), so it can
    /// forget the result (or, refused, drop it: the lease is gone).
    pub fn ack(&self, stream: StreamId, token: LeaseToken, epoch: ClaimEpoch, accepted: bool) {
        self.push(
            stream,
            Body::Ack(pb::CompleteAck {
                lease_token: token.to_string(),
                claim_epoch: epoch.0,
                accepted,
            }),
        );
    }

    /// Sends a frame to every stream and marks them draining (no more tasks).
    pub fn broadcast(&self, body: Body) {
        {
            let mut s = self.lock();
            for e in s.streams.values_mut() {
                e.draining = true;
                e.out.push(body.clone());
            }
        }
        self.bump();
    }

    /// Ends every open stream with `status` (the drain is over). A stream the broker does
    /// not end stays open as long as its worker keeps it, and the gRPC server's graceful
    /// shutdown waits for every open stream: a worker still busy past `SHUTDOWN_DRAIN` (or
    /// one that simply stays connected) would hold the process up for ever.
    pub fn close_all(&self, status: &Status) {
        for e in self.lock().streams.values() {
            e.out.closer().close(status.clone());
        }
    }

    /// Queues a frame on every stream serving `pair`.
    pub fn push_to_pair(&self, pair: &KindPair, body: &Body) {
        for e in self.lock().streams.values() {
            if e.pairs.contains(pair) {
                e.out.push(body.clone());
            }
        }
    }

    /// The pairs some stream answers dry runs of right now (see [`Registry::dry_run_stream`]).
    pub fn dry_run_pairs(&self) -> Vec<KindPair> {
        let s = self.lock();
        let set: HashSet<KindPair> = s
            .streams
            .values()
            .filter(|e| e.dry_runs)
            .flat_map(|e| e.pairs.iter().filter(|p| e.usable_for(p)).cloned())
            .collect();
        set.into_iter().collect()
    }

    /// The stream to send a dry run of `pair` to: one whose worker declared dry-run support
    /// and that may take tasks of `pair` now (claimable, ready, not draining, not suspect),
    /// the one with the most free slots first. A dry run does not take a slot: it is short,
    /// rare, and the worker's own concurrency limit queues it behind running tasks.
    pub fn dry_run_stream(&self, pair: &KindPair) -> Option<StreamId> {
        let s = self.lock();
        s.streams
            .iter()
            .filter(|(_, e)| e.dry_runs && e.usable_for(pair))
            .max_by_key(|(_, e)| e.max_inflight.saturating_sub(e.inflight))
            .map(|(id, _)| *id)
    }

    /// Every pair any stream serves.
    pub fn served_pairs(&self) -> Vec<KindPair> {
        let s = self.lock();
        let set: HashSet<KindPair> = s
            .streams
            .values()
            .flat_map(|e| e.pairs.iter().cloned())
            .collect();
        set.into_iter().collect()
    }

    /// Number of leases handed out and not yet answered.
    pub fn inflight_count(&self) -> usize {
        self.lock().inflight.len()
    }

    /// The leases in flight on stream `id` (their tasks sent to its worker, no result read
    /// yet).
    pub fn leases_on(&self, id: StreamId) -> Vec<LeaseKey> {
        self.lock()
            .inflight
            .values()
            .filter(|f| f.stream == id)
            .map(|f| f.key.clone())
            .collect()
    }

    /// Takes every lease out of the in-flight set (the drain window is over) for release.
    pub fn take_all_inflight(&self) -> Vec<LeaseKey> {
        let mut s = self.lock();
        let all: Vec<Inflight> = s.inflight.drain().map(|(_, f)| f).collect();
        for e in s.streams.values_mut() {
            e.inflight = 0;
        }
        all.into_iter().map(Inflight::ended).collect()
    }
}

/// The verb of an operate task (`None` for any other).
fn operation_verb(msg: &pb::StageTask) -> Option<String> {
    match &msg.request {
        Some(pb::stage_task::Request::OperateReq(r)) => {
            r.operation.as_ref().map(|o| o.verb.clone())
        }
        _ => None,
    }
}

impl Inflight {
    /// Leaves the in-flight set without a result (its stream ended, the drain window
    /// closed): the timer stops, the gauge drops, the key goes back for release.
    fn ended(self) -> LeaseKey {
        if let Some(t) = self.timer {
            t.abort();
        }
        metrics().inflight_add(&self.pair.kind, -1);
        self.key
    }
}

impl Roster for Registry {
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    fn workers(&self) -> Vec<WorkerInfo> {
        let s = self.lock();
        let mut out: Vec<WorkerInfo> = s
            .streams
            .iter()
            .map(|(id, e)| {
                let mut kinds: Vec<ServedKind> = e
                    .pairs
                    .iter()
                    .map(|p| ServedKind {
                        kind: p.kind.clone(),
                        kind_version: p.version,
                        ready: !e.unready.contains(p),
                    })
                    .collect();
                kinds.sort_by(|a, b| (&a.kind, a.kind_version).cmp(&(&b.kind, b.kind_version)));
                WorkerInfo {
                    stream: *id,
                    name: e.who.name.clone(),
                    sdk: e.who.sdk.clone(),
                    principal: e.who.principal.clone(),
                    peer: e.who.peer.map(|a| a.to_string()),
                    kinds,
                    max_inflight: u32::try_from(e.max_inflight).unwrap_or(u32::MAX),
                    inflight: u32::try_from(e.inflight).unwrap_or(u32::MAX),
                    connected_at: e.who.connected_at,
                    draining: e.draining,
                    dry_runs: e.dry_runs,
                }
            })
            .collect();
        out.sort_by_key(|w| w.stream);
        out
    }

    fn changed(&self) -> Arc<Notify> {
        self.changed.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, pairs: &[(&str, i32)]) -> StreamEntry {
        StreamEntry {
            out: StreamOut::new(4).0,
            who: WorkerIdentity {
                name: name.into(),
                sdk: "rust/0.1.0".into(),
                principal: None,
                peer: None,
                connected_at: chrono::Utc::now(),
            },
            pairs: pairs.iter().map(|(k, v)| KindPair::new(*k, *v)).collect(),
            unready: HashSet::new(),
            max_inflight: 8,
            inflight: 0,
            claimable: true,
            draining: false,
            activity: None,
            suspect_since: None,
            dry_runs: false,
        }
    }

    fn outgoing(token: Uuid) -> Outgoing {
        use converge_engine::ids::{ResourceId, ShardId};
        Outgoing {
            key: LeaseKey {
                resource_id: ResourceId(Uuid::nil()),
                shard_id: ShardId(0),
                task_type: converge_engine::words::TaskType::Reconcile,
                lease_token: LeaseToken(token),
                claim_epoch: ClaimEpoch(1),
            },
            pair: KindPair::new("vpc", 1),
            stage: pb::Stage::Work as i32,
            msg: pb::StageTask {
                lease_token: token.to_string(),
                claim_epoch: 1,
                generation: 3,
                ..Default::default()
            },
            deadline: None,
            pipeline: None,
        }
    }

    #[tokio::test]
    async fn a_revoked_lease_is_cancelled_in_flight_or_dropped_before_placement() {
        use futures::StreamExt;
        let r = Registry::default();
        let (out, mut frames) = StreamOut::new(8);
        let sid = r.add_stream(StreamEntry {
            out,
            ..entry("a", &[("vpc", 1)])
        });
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        assert!(r.assign(vec![outgoing(a)]).0.is_empty());
        assert_eq!(r.revocable(), [(outgoing(a).key, 3)]);
        let mut next = async || frames.next().await.unwrap().unwrap().body.unwrap();
        assert!(matches!(next().await, Body::Task(_)));

        // `a` is in flight here: taken out and cancelled with the reason; `b` is not.
        let taken = r.revoke(&[LeaseToken(a), LeaseToken(b)], "superseded");
        assert_eq!(taken.len(), 1);
        assert_eq!((taken[0].stream, r.inflight_count()), (sid, 0));
        match next().await {
            Body::Cancel(c) => assert_eq!(
                (c.lease_token, c.claim_epoch, c.reason.as_str()),
                (a.to_string(), 1, "superseded")
            ),
            other => panic!("expected CancelTask, got {other:?}"),
        }
        assert!(
            r.revoke(&[LeaseToken(a)], "deleted").is_empty(),
            "once only"
        );

        // `b` was revoked before it was placed (a claim or a composite's next stage on its
        // way): it is dropped, neither sent nor handed back for release.
        let (unplaced, timers) = r.assign(vec![outgoing(b)]);
        assert!(unplaced.is_empty() && timers.is_empty());
        assert_eq!(r.inflight_count(), 0);

        // The memory of revoked leases not in flight is bounded: the oldest go first.
        let first = Uuid::new_v4();
        r.revoke(&[LeaseToken(first)], "deleted");
        let more: Vec<LeaseToken> = (0..REVOKED_KEPT)
            .map(|_| LeaseToken(Uuid::new_v4()))
            .collect();
        r.revoke(&more, "deleted");
        let s = r.lock();
        assert_eq!(
            (s.revoked.len(), s.revoked_order.len()),
            (REVOKED_KEPT, REVOKED_KEPT)
        );
        assert!(!s.revoked.contains(&first));
    }

    #[tokio::test]
    async fn a_lease_is_the_holding_streams_alone_until_it_moves_on_resume() {
        let r = Registry::default();
        let named = |name: &str, principal: &str| {
            let mut e = entry(name, &[("vpc", 1)]);
            e.who.principal = Some(principal.into());
            e
        };
        let a = r.add_stream(named("a", "p"));
        let b = r.add_stream(StreamEntry {
            claimable: false,
            ..named("b", "p")
        });
        let token = Uuid::new_v4();
        assert!(r.assign(vec![outgoing(token)]).0.is_empty());
        let (t, epoch, key) = (LeaseToken(token), ClaimEpoch(1), outgoing(token).key);
        let held_by = |s: StreamId| Holder {
            stream: s,
            principal: Some("p".into()),
            peer: None,
        };

        // Another stream's result, heartbeat entry or page: refused, nothing taken.
        assert!(matches!(r.take_result(t, epoch, b), Held::Elsewhere(h) if h == held_by(a)));
        assert_eq!(
            r.keys_for(b, &[(t, epoch)]),
            (vec![], vec![(t, held_by(a))])
        );
        assert_eq!(r.holder_of(t), Some(held_by(a)));
        assert_eq!(r.inflight_count(), 1);
        // The holder's own heartbeat counts; a wrong epoch is neither.
        assert_eq!(r.keys_for(a, &[(t, epoch)]), (vec![key.clone()], vec![]));
        assert!(matches!(r.take_result(t, ClaimEpoch(2), a), Held::Unknown));

        // A resume by another principal is refused; by the same one the lease moves.
        assert_eq!(r.resume_refused(t, b, Some("q")), Some(held_by(a)));
        assert_eq!(r.resume_refused(t, b, Some("p")), None);
        r.adopt(
            b,
            vec![FoundLease {
                key,
                pair: KindPair::new("vpc", 1),
                verb: None,
            }],
        );
        let counts =
            |r: &Registry| -> Vec<u32> { r.workers().iter().map(|w| w.inflight).collect() };
        assert_eq!(counts(&r), [0, 1]);
        assert!(matches!(r.take_result(t, epoch, a), Held::Elsewhere(h) if h == held_by(b)));
        assert!(matches!(r.take_result(t, epoch, b), Held::Here(f) if f.stream == b));
        assert_eq!((r.inflight_count(), counts(&r)), (0, vec![0, 0]));
    }

    #[tokio::test]
    async fn tasks_claimed_ahead_wait_for_a_slot_and_leave_when_stale_revoked_or_drained() {
        let r = Registry::default();
        let sid = r.add_stream(StreamEntry {
            max_inflight: 2,
            ..entry("a", &[("vpc", 1)])
        });
        let pair = KindPair::new("vpc", 1);
        let tokens: Vec<Uuid> = (0..5).map(|_| Uuid::new_v4()).collect();
        let with_deadline = |t: Uuid| Outgoing {
            deadline: Some(Duration::from_secs(30)),
            ..outgoing(t)
        };

        // Holding: 2 placed in the slots, 3 wait, none released.
        let (unplaced, timers) =
            r.assign_or_hold(tokens.iter().map(|t| with_deadline(*t)).collect());
        assert!(unplaced.is_empty());
        assert_eq!(
            (timers.len(), r.inflight_count(), r.ahead_len(&pair)),
            (2, 2, 3)
        );
        assert_eq!(r.free_for(&pair), 0);

        // A waiting task revoked before it went out is dropped unsent.
        assert!(r.revoke(&[LeaseToken(tokens[3])], "deleted").is_empty());
        assert_eq!(r.ahead_len(&pair), 2);
        assert!(
            !r.lock().revoked.contains(&tokens[3]),
            "nothing left to remember"
        );

        // A slot frees: the oldest waiting task takes it, its deadline shortened by its wait.
        std::thread::sleep(Duration::from_millis(20));
        assert!(r.take_token(LeaseToken(tokens[0])).is_some());
        let next = r.take_ahead(&pair, r.free_for(&pair));
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].key.lease_token, LeaseToken(tokens[2]));
        let left = next[0].deadline.unwrap();
        assert!(left < Duration::from_secs(30) && left > Duration::from_secs(29));
        assert_eq!(r.assign(next).0.len(), 0);
        assert_eq!((r.ahead_len(&pair), r.free_for(&pair)), (1, 0));

        // Fresh ones stay; one older than the limit goes back.
        assert!(r.expire_ahead(Duration::from_secs(60)).is_empty());
        let stale = r.expire_ahead(Duration::from_millis(1));
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].lease_token, LeaseToken(tokens[4]));
        assert_eq!(r.ahead_len(&pair), 0);

        // A task waiting for a kind no stream serves any more goes back at the next sweep.
        let t = Uuid::new_v4();
        r.assign_or_hold(vec![with_deadline(t)]);
        assert_eq!(r.ahead_len(&pair), 1);
        r.remove_stream(sid);
        assert_eq!(
            r.expire_ahead(Duration::from_secs(60))
                .into_iter()
                .map(|k| k.lease_token)
                .collect::<Vec<_>>(),
            [LeaseToken(t)]
        );
        // And with no stream serving the kind at all, nothing is held in the first place.
        let (unplaced, _) = r.assign_or_hold(vec![outgoing(Uuid::new_v4())]);
        assert_eq!((unplaced.len(), r.ahead_len(&pair)), (1, 0));

        // The drain takes every waiting task, of every pair.
        r.add_stream(StreamEntry {
            max_inflight: 0,
            ..entry("b", &[("vpc", 1)])
        });
        r.assign_or_hold(vec![outgoing(Uuid::new_v4()), outgoing(Uuid::new_v4())]);
        assert_eq!(r.ahead_len(&pair), 2);
        assert_eq!(r.take_all_ahead().len(), 2);
        assert_eq!(r.ahead_len(&pair), 0);
    }

    /// A task held longer than a quarter of its deadline goes back even inside the age limit:
    /// the claim's deadline clock runs while it waits.
    #[test]
    fn a_task_claimed_ahead_goes_back_before_a_quarter_of_its_deadline_has_passed() {
        let r = Registry::default();
        r.add_stream(StreamEntry {
            max_inflight: 0,
            ..entry("a", &[("vpc", 1)])
        });
        let t = Uuid::new_v4();
        r.assign_or_hold(vec![Outgoing {
            deadline: Some(Duration::from_millis(40)),
            ..outgoing(t)
        }]);
        assert!(r.expire_ahead(Duration::from_secs(60)).is_empty());
        std::thread::sleep(Duration::from_millis(15));
        assert_eq!(r.expire_ahead(Duration::from_secs(60)).len(), 1);
    }

    #[tokio::test]
    async fn a_stream_past_a_deadline_takes_no_task_until_heard_from_after_it() {
        let r = Registry::default();
        let a = r.add_stream(entry("a", &[("vpc", 1)]));
        let vpc = || vec![(KindPair::new("vpc", 1), 8)];
        assert_eq!(r.capacity(), vpc());
        let before = tokio::time::Instant::now();
        let at = before + Duration::from_millis(1);
        r.suspect(a, at);
        assert!(r.capacity().is_empty());
        let (unplaced, _) = r.assign(vec![outgoing(Uuid::new_v4())]);
        assert_eq!(unplaced.len(), 1, "a suspect stream is handed nothing");
        // A frame that arrived before the deadline proves nothing.
        r.heard_from(a, before);
        assert!(r.capacity().is_empty());
        r.heard_from(a, at + Duration::from_millis(1));
        assert_eq!(r.capacity(), vpc());

        // A later deadline replaces an earlier one: the earlier one's keepalive round does
        // not lift it.
        let later = at + Duration::from_secs(1);
        r.suspect(a, at);
        r.suspect(a, later);
        assert!(!r.clear_suspicion(a, at));
        assert!(r.capacity().is_empty());
        assert!(r.clear_suspicion(a, later));
        assert_eq!(r.capacity(), vpc());
    }

    #[tokio::test]
    async fn the_roster_follows_streams_and_readiness_but_not_each_task() {
        let r = Registry::default();
        let g0 = r.generation();
        let a = r.add_stream(entry("a", &[("vpc", 1), ("db", 2)]));
        assert!(r.generation() > g0, "a connect is a change");
        let w = r.workers();
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].name.as_str(), w[0].max_inflight), ("a", 8));
        let kinds: Vec<(&str, i32, bool)> = w[0]
            .kinds
            .iter()
            .map(|k| (k.kind.as_str(), k.kind_version, k.ready))
            .collect();
        assert_eq!(kinds, [("db", 2, true), ("vpc", 1, true)]);

        let g1 = r.generation();
        r.set_ready(a, KindPair::new("vpc", 1), false);
        assert!(r.generation() > g1, "a readiness flip is a change");
        assert!(!r.workers()[0].kinds[1].ready);
        let g2 = r.generation();
        r.set_ready(a, KindPair::new("vpc", 1), false);
        assert_eq!(r.generation(), g2, "no flip, no change");

        r.adopt(a, Vec::new());
        assert_eq!(r.generation(), g2, "in-flight counts are not a change");
        r.remove_stream(a);
        assert!(r.generation() > g2, "a disconnect is a change");
        assert!(r.workers().is_empty());
    }
}
