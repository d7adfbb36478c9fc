//! The broker's in-memory view of its connected streams and the leases it handed out.
//!
//! One mutex guards both maps so a task's slot, its stream and its lease always agree; no
//! await happens under it (frames are queued with `try_send`).

use std::collections::{HashMap, HashSet};

use tokio::{sync::mpsc, task::AbortHandle};
use tonic::Status;
use uuid::Uuid;

use converge_proto::pb::{self, work_stream_server_msg::Body};

use crate::{
    db::queue::LeaseKey,
    ids::{ClaimEpoch, KindPair, LeaseToken},
    pipeline::Pipeline,
};

/// Outbound frames of one stream.
pub(crate) type StreamTx = mpsc::Sender<Result<pb::WorkStreamServerMsg, Status>>;

/// Identifies a stream within this broker.
pub(crate) type StreamId = u64;

pub(crate) struct StreamEntry {
    pub tx: StreamTx,
    pub pairs: HashSet<KindPair>,
    pub unready: HashSet<KindPair>,
    pub max_inflight: usize,
    pub inflight: usize,
    /// False until the default configs were pushed (rule 2: config before any task).
    pub claimable: bool,
    pub draining: bool,
}

impl StreamEntry {
    fn free_for(&self, pair: &KindPair) -> usize {
        if !self.claimable
            || self.draining
            || !self.pairs.contains(pair)
            || self.unready.contains(pair)
        {
            return 0;
        }
        self.max_inflight.saturating_sub(self.inflight)
    }
}

pub(crate) struct Inflight {
    pub key: LeaseKey,
    pub stream: StreamId,
    pub stage: i32,
    pub timer: Option<AbortHandle>,
    /// Set for composite pipelines (compose/work/rollup under one lease).
    pub pipeline: Option<Box<Pipeline>>,
}

/// A task ready to hand to a stream.
pub(crate) struct Outgoing {
    pub key: LeaseKey,
    pub pair: KindPair,
    pub stage: i32,
    pub msg: pb::StageTask,
    pub pipeline: Option<Box<Pipeline>>,
}

#[derive(Default)]
struct State {
    next_id: StreamId,
    streams: HashMap<StreamId, StreamEntry>,
    inflight: HashMap<Uuid, Inflight>,
}

#[derive(Default)]
pub(crate) struct Registry {
    state: std::sync::Mutex<State>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("registry lock poisoned")
    }

    pub fn add_stream(&self, entry: StreamEntry) -> StreamId {
        let mut s = self.lock();
        s.next_id += 1;
        let id = s.next_id;
        s.streams.insert(id, entry);
        id
    }

    pub fn set_claimable(&self, id: StreamId) {
        if let Some(e) = self.lock().streams.get_mut(&id) {
            e.claimable = true;
        }
    }

    /// Removes a stream and hands back every lease it still held (to be released).
    pub fn remove_stream(&self, id: StreamId) -> Vec<LeaseKey> {
        let mut s = self.lock();
        s.streams.remove(&id);
        let tokens: Vec<Uuid> = s
            .inflight
            .iter()
            .filter(|(_, f)| f.stream == id)
            .map(|(t, _)| *t)
            .collect();
        tokens
            .into_iter()
            .filter_map(|t| s.inflight.remove(&t))
            .map(|f| {
                if let Some(t) = f.timer {
                    t.abort();
                }
                f.key
            })
            .collect()
    }

    pub fn set_ready(&self, id: StreamId, pair: KindPair, ready: bool) {
        if let Some(e) = self.lock().streams.get_mut(&id) {
            if ready {
                e.unready.remove(&pair);
            } else {
                e.unready.insert(pair);
            }
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
    /// with a deadline, what the caller must arm a timer for.
    pub fn assign(&self, tasks: Vec<Outgoing>) -> (Vec<LeaseKey>, Vec<LeaseToken>) {
        let mut s = self.lock();
        let mut unplaced = Vec::new();
        let mut placed = Vec::new();
        for t in tasks {
            let best = s
                .streams
                .iter()
                .map(|(id, e)| (*id, e.free_for(&t.pair)))
                .filter(|(_, f)| *f > 0)
                .max_by_key(|(_, f)| *f)
                .map(|(id, _)| id);
            let Some(sid) = best else {
                unplaced.push(t.key);
                continue;
            };
            let entry = s.streams.get_mut(&sid).expect("stream chosen above exists");
            let frame = pb::WorkStreamServerMsg {
                body: Some(Body::Task(t.msg)),
            };
            if entry.tx.try_send(Ok(frame)).is_err() {
                unplaced.push(t.key);
                continue;
            }
            entry.inflight += 1;
            let token = t.key.lease_token;
            s.inflight.insert(
                token.0,
                Inflight {
                    key: t.key,
                    stream: sid,
                    stage: t.stage,
                    timer: None,
                    pipeline: t.pipeline,
                },
            );
            placed.push(token);
        }
        (unplaced, placed)
    }

    pub fn set_timer(&self, token: LeaseToken, timer: AbortHandle) {
        match self.lock().inflight.get_mut(&token.0) {
            Some(f) => f.timer = Some(timer),
            None => timer.abort(),
        }
    }

    /// Takes a lease out of the in-flight set (its result arrived or its deadline passed),
    /// freeing the stream's slot. `None` if this broker does not hold it at that epoch.
    pub fn take(&self, token: LeaseToken, epoch: ClaimEpoch) -> Option<Inflight> {
        let mut s = self.lock();
        match s.inflight.get(&token.0) {
            Some(f) if f.key.claim_epoch == epoch => {}
            _ => return None,
        }
        let f = s.inflight.remove(&token.0)?;
        if let Some(e) = s.streams.get_mut(&f.stream) {
            e.inflight = e.inflight.saturating_sub(1);
        }
        Some(f)
    }

    /// Takes a lease out of the in-flight set whatever its epoch (its deadline passed).
    pub fn take_token(&self, token: LeaseToken) -> Option<Inflight> {
        let epoch = self.lock().inflight.get(&token.0)?.key.claim_epoch;
        self.take(token, epoch)
    }

    /// The keys of the given leases that this broker holds (for heartbeat attestation).
    pub fn keys_for(&self, leases: &[(LeaseToken, ClaimEpoch)]) -> Vec<LeaseKey> {
        let s = self.lock();
        leases
            .iter()
            .filter_map(|(t, e)| s.inflight.get(&t.0).filter(|f| f.key.claim_epoch == *e))
            .map(|f| f.key.clone())
            .collect()
    }

    /// Adopts leases found in the database for a resumed stream (a worker that reconnected
    /// to this broker while still running tasks another session handed out).
    pub fn adopt(&self, stream: StreamId, keys: Vec<LeaseKey>) {
        let mut s = self.lock();
        let mut n = 0;
        for k in keys {
            if s.inflight.contains_key(&k.lease_token.0) {
                continue;
            }
            s.inflight.insert(
                k.lease_token.0,
                Inflight {
                    key: k,
                    stream,
                    stage: 0,
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

    /// Queues a frame on one stream; false if the stream is gone or its queue is full.
    pub fn send(&self, stream: StreamId, body: Body) -> bool {
        let s = self.lock();
        match s.streams.get(&stream) {
            Some(e) => {
                e.tx.try_send(Ok(pb::WorkStreamServerMsg { body: Some(body) }))
                    .is_ok()
            }
            None => false,
        }
    }

    /// The sender of one stream (for frames that must not be dropped when the queue is full).
    pub fn sender(&self, stream: StreamId) -> Option<StreamTx> {
        self.lock().streams.get(&stream).map(|e| e.tx.clone())
    }

    /// Sends a frame to every stream and marks them draining (no more tasks).
    pub fn broadcast(&self, body: Body) {
        let mut s = self.lock();
        for e in s.streams.values_mut() {
            e.draining = true;
            let _ = e.tx.try_send(Ok(pb::WorkStreamServerMsg {
                body: Some(body.clone()),
            }));
        }
    }

    /// Senders of the streams serving `pair`.
    pub fn senders_for(&self, pair: &KindPair) -> Vec<StreamTx> {
        self.lock()
            .streams
            .values()
            .filter(|e| e.pairs.contains(pair))
            .map(|e| e.tx.clone())
            .collect()
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

    pub fn inflight_count(&self) -> usize {
        self.lock().inflight.len()
    }

    pub fn take_all_inflight(&self) -> Vec<LeaseKey> {
        let mut s = self.lock();
        let all: Vec<Inflight> = s.inflight.drain().map(|(_, f)| f).collect();
        for e in s.streams.values_mut() {
            e.inflight = 0;
        }
        all.into_iter()
            .map(|f| {
                if let Some(t) = f.timer {
                    t.abort();
                }
                f.key
            })
            .collect()
    }
}
