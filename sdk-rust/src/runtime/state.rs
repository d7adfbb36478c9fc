//! The worker-lifetime state every loop shares: tracked leases, kept results, the config
//! cache, advertised readiness and the link to the current stream.
//!
//! Guarantees: one `std::sync::Mutex` guards it all and is never held across an `.await`;
//! every frame goes through the current session's one unbounded sender while the lock is
//! held, so frames built from one consistent view are queued in order (the Subscribe burst
//! cannot interleave with a result or an Interest).

use std::{
    collections::{BTreeMap, HashMap},
    panic::AssertUnwindSafe,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use converge_proto::pb::{self, work_stream_client_msg::Body};
use tokio::{
    sync::{Semaphore, mpsc, watch},
    task::AbortHandle,
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::{
    config::WorkerConfig,
    convert::wire_version,
    provider::{Registered, Registry},
    types::{CancelReason, KindVersion, ProviderConfig},
};

/// Most results kept while waiting for their `CompleteAck`.
pub(crate) const MAX_UNACKED: usize = 1024;

/// The SDK identity sent in `Subscribe.sdk`.
pub(crate) const SDK: &str = concat!("rust/", env!("CARGO_PKG_VERSION"));

/// A lease as the broker fences it: token plus claim epoch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LeaseKey {
    pub(crate) token: String,
    pub(crate) epoch: i64,
}

impl LeaseKey {
    pub(crate) fn new(token: impl Into<String>, epoch: i64) -> Self {
        Self {
            token: token.into(),
            epoch,
        }
    }
}

/// A task accepted from the broker whose handler has not returned (or not started yet).
struct Running {
    cancel: CancellationToken,
    /// Set before `cancel` fires: the handler reads it from its request.
    reason: CancelReason,
    abort: Option<AbortHandle>,
}

/// Results waiting for an ack, oldest first.
#[derive(Default)]
struct Unacked {
    next_seq: u64,
    by_seq: BTreeMap<u64, (LeaseKey, pb::StageComplete)>,
    by_key: HashMap<LeaseKey, u64>,
}

impl Unacked {
    fn len(&self) -> usize {
        self.by_seq.len()
    }

    fn get(&self, key: &LeaseKey) -> Option<&pb::StageComplete> {
        self.by_key
            .get(key)
            .and_then(|s| self.by_seq.get(s))
            .map(|(_, c)| c)
    }

    fn remove(&mut self, key: &LeaseKey) -> bool {
        match self.by_key.remove(key) {
            Some(seq) => self.by_seq.remove(&seq).is_some(),
            None => false,
        }
    }

    /// Keeps `complete`; returns the key of the oldest result dropped to respect the cap.
    fn push(&mut self, key: LeaseKey, complete: pb::StageComplete) -> Option<LeaseKey> {
        self.remove(&key);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.by_key.insert(key.clone(), seq);
        self.by_seq.insert(seq, (key, complete));
        if self.by_seq.len() > MAX_UNACKED {
            let (_, (old, _)) = self.by_seq.pop_first()?;
            self.by_key.remove(&old);
            return Some(old);
        }
        None
    }
}

/// The current stream's sender.
struct SessionLink {
    id: u64,
    tx: mpsc::UnboundedSender<pb::WorkStreamClientMsg>,
}

#[derive(Default)]
pub(crate) struct State {
    running: HashMap<LeaseKey, Running>,
    unacked: Unacked,
    session: Option<SessionLink>,
    next_session: u64,
    configs: HashMap<KindVersion, ProviderConfig>,
    /// The readiness last told to the broker (or to be told in the next Subscribe burst).
    advertised: HashMap<KindVersion, bool>,
    shutting_down: bool,
}

impl State {
    fn send(&self, body: Body) {
        if let Some(link) = &self.session {
            // A closed receiver means the stream just ended; kept results are re-sent on
            // the next one, so nothing is lost here.
            let _ = link.tx.send(pb::WorkStreamClientMsg { body: Some(body) });
        }
    }
}

/// How a task frame was taken in.
pub(crate) enum Admission {
    /// Tracked; run it with this token, which fires after the reason is set.
    Run(CancellationToken, CancelReason),
    /// Already running (a duplicate delivery); ignore the frame.
    Duplicate,
    /// Already finished and waiting for its ack; the kept result was re-sent.
    Resent,
}

/// Everything the runtime's loops share, for the worker's whole life.
pub(crate) struct Shared {
    pub(crate) cfg: WorkerConfig,
    pub(crate) registry: Registry,
    /// Bounds concurrently running handlers to `max_parallel`.
    pub(crate) permits: Arc<Semaphore>,
    state: Mutex<State>,
    /// Tracked leases plus kept results; 0 means nothing is left to finish or deliver.
    outstanding: watch::Sender<usize>,
    /// Handler tasks alive (including cancelled ones that have not returned yet).
    handlers: watch::Sender<usize>,
}

/// Counts a live handler task for as long as it exists (dropped on return, panic or abort).
pub(crate) struct HandlerGuard(Arc<Shared>);

impl Drop for HandlerGuard {
    fn drop(&mut self) {
        self.0.handlers.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Shared {
    pub(crate) fn new(cfg: WorkerConfig, registry: Registry) -> Self {
        let permits = Arc::new(Semaphore::new(cfg.max_parallel));
        let advertised = registry
            .entries()
            .iter()
            .map(|e| (e.kv.clone(), true))
            .collect();
        Self {
            cfg,
            registry,
            permits,
            state: Mutex::new(State {
                advertised,
                ..State::default()
            }),
            outstanding: watch::Sender::new(0),
            handlers: watch::Sender::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The lock is never held across user code, so a poisoned lock still holds
        // consistent data.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn publish(&self, st: &State) {
        self.outstanding
            .send_replace(st.running.len() + st.unacked.len());
    }

    /// A receiver of the outstanding count (tracked leases plus unacked results).
    pub(crate) fn outstanding(&self) -> watch::Receiver<usize> {
        self.outstanding.subscribe()
    }

    /// Registers a live handler task until the guard drops.
    pub(crate) fn handler_guard(self: &Arc<Self>) -> HandlerGuard {
        self.handlers.send_modify(|n| *n += 1);
        HandlerGuard(Arc::clone(self))
    }

    /// A receiver of the live handler count.
    pub(crate) fn live_handlers(&self) -> watch::Receiver<usize> {
        self.handlers.subscribe()
    }

    /// (running, unacked) counts, for logs.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let st = self.lock();
        (st.running.len(), st.unacked.len())
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.lock().shutting_down
    }

    /// Opens a session: installs `tx` as the one sender and queues, in order, the
    /// Subscribe frame (listing every tracked lease and kept result in `resumed`), an
    /// `Interest{has_worker:false}` for each pair in `readiness` that is not ready (all of
    /// them once shutting down), and every kept result. Returns the session id.
    pub(crate) fn open_session(
        &self,
        tx: mpsc::UnboundedSender<pb::WorkStreamClientMsg>,
        readiness: &[(KindVersion, bool)],
    ) -> u64 {
        let mut st = self.lock();
        st.next_session += 1;
        let id = st.next_session;
        let resumed: Vec<pb::ResumedTask> = st
            .running
            .keys()
            .chain(st.unacked.by_seq.values().map(|(k, _)| k))
            .map(|k| pb::ResumedTask {
                lease_token: k.token.clone(),
                claim_epoch: k.epoch,
            })
            .collect();
        let entries = self.registry.entries();
        let subscribe = pb::Subscribe {
            kinds: entries.iter().map(|e| e.kv.kind.clone()).collect(),
            kind_versions: entries.iter().map(|e| e.kv.version).collect(),
            max_inflight: u32::try_from(self.cfg.max_parallel).unwrap_or(u32::MAX),
            resumed,
            worker_name: self.cfg.worker_name.clone(),
            sdk: SDK.to_string(),
            // Compose handlers get `ReactionRequest::dry_run` and answer as usual.
            dry_runs: true,
        };
        info!(
            session = id,
            kinds = entries.len(),
            resumed = subscribe.resumed.len(),
            unacked = st.unacked.len(),
            "subscribing"
        );
        st.session = Some(SessionLink { id, tx });
        st.send(Body::Subscribe(subscribe));
        let shutting_down = st.shutting_down;
        for (kv, ready) in readiness {
            let ready = *ready && !shutting_down;
            st.advertised.insert(kv.clone(), ready);
            if !ready {
                st.send(Body::Interest(interest(kv, false)));
            }
        }
        for (_, complete) in st.unacked.by_seq.values() {
            st.send(Body::Complete(complete.clone()));
        }
        id
    }

    /// Detaches session `id` if it is still the current one.
    pub(crate) fn close_session(&self, id: u64) {
        let mut st = self.lock();
        if st.session.as_ref().is_some_and(|l| l.id == id) {
            st.session = None;
        }
    }

    /// Takes in a task frame.
    pub(crate) fn admit(&self, key: &LeaseKey) -> Admission {
        let mut st = self.lock();
        if st.running.contains_key(key) {
            return Admission::Duplicate;
        }
        if let Some(c) = st.unacked.get(key).cloned() {
            st.send(Body::Complete(c));
            return Admission::Resent;
        }
        let (cancel, reason) = (CancellationToken::new(), CancelReason::default());
        st.running.insert(
            key.clone(),
            Running {
                cancel: cancel.clone(),
                reason: reason.clone(),
                abort: None,
            },
        );
        self.publish(&st);
        Admission::Run(cancel, reason)
    }

    /// Remembers how to abort a started handler.
    pub(crate) fn set_abort(&self, key: &LeaseKey, abort: AbortHandle) {
        if let Some(r) = self.lock().running.get_mut(key) {
            r.abort = Some(abort);
        }
    }

    /// Records the result of a tracked task: keeps it until acked and sends it on the
    /// current stream. A task that is no longer tracked (cancelled) is dropped silently.
    pub(crate) fn finish(&self, key: LeaseKey, complete: pb::StageComplete) {
        let mut st = self.lock();
        if st.running.remove(&key).is_none() {
            debug!(lease = %key.token, "result of a cancelled task dropped");
            return;
        }
        self.keep_and_send(&mut st, key, complete);
    }

    /// Records a result for a task that was never tracked (refused while draining).
    pub(crate) fn finish_untracked(&self, key: LeaseKey, complete: pb::StageComplete) {
        let mut st = self.lock();
        self.keep_and_send(&mut st, key, complete);
    }

    fn keep_and_send(&self, st: &mut State, key: LeaseKey, complete: pb::StageComplete) {
        st.send(Body::Complete(complete.clone()));
        if let Some(old) = st.unacked.push(key, complete) {
            warn!(
                lease = %old.token,
                claim_epoch = old.epoch,
                cap = MAX_UNACKED,
                "unacked result buffer full; dropped the oldest result (the broker will re-run it)"
            );
        }
        self.publish(st);
    }

    /// Handles a `CompleteAck`: the result is dropped either way.
    pub(crate) fn ack(&self, key: &LeaseKey, accepted: bool) {
        let mut st = self.lock();
        if st.unacked.remove(key) {
            if accepted {
                debug!(lease = %key.token, claim_epoch = key.epoch, "result acked");
            } else {
                info!(lease = %key.token, claim_epoch = key.epoch, "result refused as stale");
            }
            self.publish(&st);
        } else {
            debug!(lease = %key.token, claim_epoch = key.epoch, "ack for an unknown result");
        }
    }

    /// Handles a `CancelTask`: cancels the handler (its request's `cancel_reason` says
    /// `reason`) and forgets the lease and any result.
    pub(crate) fn cancel_task(&self, key: &LeaseKey, reason: &str) -> bool {
        let mut st = self.lock();
        let running = st.running.remove(key);
        let had_result = st.unacked.remove(key);
        if let Some(r) = &running {
            r.reason.set(reason);
            r.cancel.cancel();
        }
        self.publish(&st);
        running.is_some() || had_result
    }

    /// Cancels every handler's token and forgets every lease (end of shutdown); returns the
    /// abort handles of the handlers that had started.
    pub(crate) fn cancel_all(&self) -> Vec<AbortHandle> {
        let mut st = self.lock();
        let mut aborts = Vec::new();
        for (_, r) in st.running.drain() {
            r.reason.set(CancelReason::SHUTDOWN);
            r.cancel.cancel();
            aborts.extend(r.abort);
        }
        st.unacked = Unacked::default();
        self.publish(&st);
        aborts
    }

    /// Queues a coalesced heartbeat of every tracked task, if any runs and a stream is up.
    pub(crate) fn heartbeat(&self) -> usize {
        let st = self.lock();
        if st.running.is_empty() || st.session.is_none() {
            return 0;
        }
        let (lease_token, claim_epoch) = st
            .running
            .keys()
            .map(|k| (k.token.clone(), k.epoch))
            .unzip();
        let hb = pb::WorkHeartbeat {
            lease_token,
            claim_epoch,
        };
        st.send(Body::Heartbeat(hb));
        st.running.len()
    }

    /// Applies a poll of `Provider::ready`: each edge becomes an Interest frame.
    pub(crate) fn update_readiness(&self, readiness: &[(KindVersion, bool)]) {
        let mut st = self.lock();
        if st.shutting_down {
            return;
        }
        for (kv, ready) in readiness {
            let prev = st.advertised.insert(kv.clone(), *ready);
            if prev != Some(*ready) {
                info!(kind = %kv.kind, kind_version = kv.version, ready, "provider readiness changed");
                st.send(Body::Interest(interest(kv, *ready)));
            }
        }
    }

    /// Starts shutdown: refuse new tasks and tell the broker every pair is unready.
    pub(crate) fn begin_shutdown(&self) {
        let mut st = self.lock();
        st.shutting_down = true;
        let flips: Vec<KindVersion> = st
            .advertised
            .iter()
            .filter(|(_, r)| **r)
            .map(|(kv, _)| kv.clone())
            .collect();
        for kv in flips {
            st.advertised.insert(kv.clone(), false);
            st.send(Body::Interest(interest(&kv, false)));
        }
    }

    /// The cached default config of a pair.
    pub(crate) fn config_for(&self, kv: &KindVersion) -> ProviderConfig {
        self.lock().configs.get(kv).cloned().unwrap_or_default()
    }

    /// Stores a pair's default config; fires `on_config` when `always` or when it changed.
    pub(crate) fn apply_config(&self, reg: &Registered, cfg: ProviderConfig, always: bool) {
        let changed = {
            let mut st = self.lock();
            st.configs.insert(reg.kv.clone(), cfg.clone()).as_ref() != Some(&cfg)
        };
        if always || changed {
            debug!(kind = %reg.kv.kind, kind_version = reg.kv.version, empty = cfg.is_empty(), "provider config applied");
            let p = reg.provider.clone();
            if std::panic::catch_unwind(AssertUnwindSafe(|| p.on_config(cfg))).is_err() {
                warn!(kind = %reg.kv.kind, kind_version = reg.kv.version, "on_config panicked");
            }
        }
    }

    /// Applies a pulled set of default configs to every registered pair (pairs without an
    /// entry have none).
    pub(crate) fn apply_pulled(&self, entries: Vec<pb::ProviderConfigEntry>, always: bool) {
        let mut by_pair: HashMap<KindVersion, pb::ProviderConfigEntry> = entries
            .into_iter()
            .map(|e| {
                (
                    KindVersion::new(e.kind.clone(), wire_version(e.kind_version)),
                    e,
                )
            })
            .collect();
        for reg in self.registry.entries() {
            let cfg = match by_pair.remove(&reg.kv) {
                Some(e) => provider_config(&reg.kv, &e.config, e.bundle),
                None => ProviderConfig::default(),
            };
            self.apply_config(reg, cfg, always);
        }
    }
}

/// Builds a cached config from wire bytes; a malformed spec is logged and treated as absent.
pub(crate) fn provider_config(kv: &KindVersion, spec: &[u8], bundle: Vec<u8>) -> ProviderConfig {
    let spec = if spec.is_empty() {
        None
    } else {
        match serde_json::from_slice(spec) {
            Ok(v) => Some(v),
            Err(e) => {
                warn!(kind = %kv.kind, kind_version = kv.version, error = %e, "provider config is not valid JSON; ignoring its spec");
                None
            }
        }
    };
    ProviderConfig {
        spec,
        bundle: bundle.into(),
    }
}

fn interest(kv: &KindVersion, has_worker: bool) -> pb::Interest {
    pb::Interest {
        kind: kv.kind.clone(),
        credit: 0,
        has_worker,
        kind_version: kv.version,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(token: &str) -> pb::StageComplete {
        pb::StageComplete {
            lease_token: token.into(),
            ..Default::default()
        }
    }

    #[test]
    fn unacked_buffer_drops_the_oldest_beyond_its_cap() {
        let mut u = Unacked::default();
        for i in 0..MAX_UNACKED {
            assert_eq!(
                u.push(LeaseKey::new(format!("t{i}"), 1), complete("x")),
                None
            );
        }
        let dropped = u.push(LeaseKey::new("new", 1), complete("new"));
        assert_eq!(dropped, Some(LeaseKey::new("t0", 1)));
        assert_eq!(u.len(), MAX_UNACKED);
        assert!(u.get(&LeaseKey::new("t0", 1)).is_none());
        assert!(u.get(&LeaseKey::new("new", 1)).is_some());
        // Re-keeping the same lease replaces it instead of growing the buffer.
        assert_eq!(u.push(LeaseKey::new("new", 1), complete("again")), None);
        assert_eq!(u.len(), MAX_UNACKED);
        assert!(u.remove(&LeaseKey::new("new", 1)));
        assert!(!u.remove(&LeaseKey::new("new", 1)));
        // A different epoch is a different lease.
        assert!(u.get(&LeaseKey::new("t1", 2)).is_none());
    }
}
