//! Single applies (`POST /api/v1/resources`) written as batches: requests that arrive while
//! a write is in flight are queued and go to the database together, as one
//! `resource_apply_batch` statement, when it finishes.
//!
//! Why: a single apply is one small transaction, and with many clients PostgreSQL spent
//! most of each one on per-transaction and per-statement work (the kind guard, the
//! statement-level triggers, scheduling, commit) and on 32 backends taking turns on 2 cores,
//! not on its rows (issue 44: about 1.75 ms of server CPU per apply, while the batch endpoint
//! does the same rows 20 times faster). The batch statement does exactly what a single apply
//! does, per item (`resource_apply` is a batch of one), so coalescing changes no outcome.
//!
//! How: one writer task per process. It takes the oldest queued request and every other
//! one already waiting (up to [`MAX_BATCH`]), writes them in one statement, answers each,
//! and repeats; an idle process therefore writes a lone apply at once (a batch of one) and
//! a busy one batches as deep as its backlog, as group commit does. One batch holds:
//! - requests of one actor (the name the events record: `converge.actor` is per
//!   transaction);
//! - distinct (kind, name) pairs (the statement refuses duplicates), and requests for one
//!   pair stay in arrival order: once a request is held back, every later one for its pair
//!   is held back too.
//!
//! A batch that fails as a whole (a kind version deleted under one of its items, a
//! deadlock with another pod) is retried one request at a time, so each caller gets the
//! error of its own item and the others their results. A caller that goes away still has
//! its queued apply written: as with a request cut off mid-statement, the client cannot know,
//! and applies are idempotent.

use std::collections::{HashSet, VecDeque};

use converge_engine::db::resources::{self, Applied, ApplyItem};
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

/// Most applies written in one statement.
pub const MAX_BATCH: usize = 256;

/// Applies queued before a caller waits for room (backpressure on the HTTP handlers).
const QUEUE: usize = 4 * MAX_BATCH;

/// One queued apply and where its answer goes.
struct Request {
    actor: Option<String>,
    item: ApplyItem,
    reply: oneshot::Sender<Result<Applied, sqlx::Error>>,
}

impl Request {
    fn key(&self) -> (&str, &str) {
        (&self.item.kind, &self.item.name)
    }
}

/// The handle handlers apply through (cheap to clone); the writer task ends when the last
/// handle is dropped.
#[derive(Clone)]
pub struct ApplyCoalescer {
    pool: PgPool,
    tx: mpsc::Sender<Request>,
}

impl ApplyCoalescer {
    /// Starts the writer task on `pool` (the primary). Needs a Tokio runtime.
    pub fn start(pool: PgPool) -> ApplyCoalescer {
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(write_loop(pool.clone(), rx));
        ApplyCoalescer { pool, tx }
    }

    /// Creates or updates `item` as `actor`, as [`resources::resource_apply`] does, possibly
    /// in one statement with other callers' applies.
    pub async fn apply(
        &self,
        actor: Option<&str>,
        item: ApplyItem,
    ) -> Result<Applied, sqlx::Error> {
        let (reply, answer) = oneshot::channel();
        let req = Request {
            actor: actor.map(str::to_owned),
            item,
            reply,
        };
        match self.tx.send(req).await {
            Ok(()) => answer.await.unwrap_or(Err(sqlx::Error::PoolClosed)),
            // The writer is gone (the runtime is shutting down): write it here.
            Err(mpsc::error::SendError(req)) => {
                apply_one(&self.pool, req.actor.as_deref(), &req.item).await
            }
        }
    }
}

/// The writer: one batch at a time, each holding what queued while the last was written.
async fn write_loop(pool: PgPool, mut rx: mpsc::Receiver<Request>) {
    let mut queued: VecDeque<Request> = VecDeque::new();
    loop {
        if queued.is_empty() {
            match rx.recv().await {
                Some(r) => queued.push_back(r),
                None => return,
            }
        }
        while queued.len() < QUEUE {
            match rx.try_recv() {
                Ok(r) => queued.push_back(r),
                Err(_) => break,
            }
        }
        let batch = take_batch(&mut queued);
        write(&pool, batch).await;
    }
}

/// Takes from `queued`, in order, the next batch: the first request, then each later one
/// of the same actor whose (kind, name) is neither in the batch nor held back before it.
/// What is not taken stays queued, in its order.
fn take_batch(queued: &mut VecDeque<Request>) -> Vec<Request> {
    let Some(first) = queued.pop_front() else {
        return Vec::new();
    };
    let mut batch = vec![first];
    if queued.is_empty() {
        return batch;
    }
    let mut kept = VecDeque::with_capacity(queued.len());
    {
        let actor = batch[0].actor.clone();
        let mut taken: HashSet<(String, String)> = HashSet::new();
        let mut held: HashSet<(String, String)> = HashSet::new();
        let key = |r: &Request| (r.key().0.to_owned(), r.key().1.to_owned());
        taken.insert(key(&batch[0]));
        for r in queued.drain(..) {
            let k = key(&r);
            if batch.len() < MAX_BATCH
                && r.actor == actor
                && !taken.contains(&k)
                && !held.contains(&k)
            {
                taken.insert(k);
                batch.push(r);
            } else {
                held.insert(k);
                kept.push_back(r);
            }
        }
    }
    *queued = kept;
    batch
}

/// Writes `batch` in one statement and answers each request; on a failure of the whole
/// statement, writes each on its own. The items move out of their requests (no copy of a
/// spec per apply).
async fn write(pool: &PgPool, batch: Vec<Request>) {
    let actor = batch.first().and_then(|r| r.actor.clone());
    let (items, replies): (Vec<ApplyItem>, Vec<_>) =
        batch.into_iter().map(|r| (r.item, r.reply)).unzip();
    if items.len() == 1 {
        let out = apply_one(pool, actor.as_deref(), &items[0]).await;
        let _ = replies.into_iter().next().map(|r| r.send(out));
        return;
    }
    match resources::resource_apply_batch(pool, actor.as_deref(), &items).await {
        Ok(applied) => {
            for (reply, a) in replies.into_iter().zip(applied) {
                let _ = reply.send(Ok(a));
            }
        }
        Err(e) => {
            tracing::debug!(error = %e, n = items.len(), "a coalesced apply batch failed; writing its applies one by one");
            for (item, reply) in items.iter().zip(replies) {
                let _ = reply.send(apply_one(pool, actor.as_deref(), item).await);
            }
        }
    }
}

/// One apply, on its own.
async fn apply_one(
    pool: &PgPool,
    actor: Option<&str>,
    i: &ApplyItem,
) -> Result<Applied, sqlx::Error> {
    resources::resource_apply(
        pool,
        actor,
        &i.kind,
        i.kind_version,
        &i.name,
        &i.spec,
        &i.labels,
        i.provider_config_ref.as_deref(),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(actor: Option<&str>, kind: &str, name: &str) -> Request {
        Request {
            actor: actor.map(str::to_owned),
            item: ApplyItem {
                kind: kind.into(),
                kind_version: 1,
                name: name.into(),
                spec: json!({}),
                labels: json!({}),
                provider_config_ref: None,
            },
            reply: oneshot::channel().0,
        }
    }

    fn names(v: impl IntoIterator<Item = Request>) -> Vec<String> {
        v.into_iter()
            .map(|r| format!("{}:{}", r.actor.as_deref().unwrap_or("-"), r.item.name))
            .collect()
    }

    #[test]
    fn a_batch_holds_one_actor_and_distinct_pairs_in_arrival_order() {
        let mut q: VecDeque<Request> = [
            req(None, "k", "a"),
            req(None, "k", "b"),
            req(Some("x"), "k", "c"),
            req(None, "k", "a"), // a second write of a: next batch
            req(None, "k", "d"),
            req(None, "j", "a"), // another kind: another pair
            req(None, "k", "c"), // c is held back (another actor's write first)
        ]
        .into();
        let first = take_batch(&mut q);
        assert_eq!(names(first), ["-:a", "-:b", "-:d", "-:a"]);
        assert_eq!(names(q.drain(..)), ["x:c", "-:a", "-:c"]);
    }

    #[test]
    fn later_writes_of_a_held_pair_stay_behind_it() {
        let mut q: VecDeque<Request> = [
            req(Some("x"), "k", "a"),
            req(None, "k", "b"),
            req(Some("x"), "k", "b"),
            req(Some("x"), "k", "c"),
        ]
        .into();
        assert_eq!(names(take_batch(&mut q)), ["x:a", "x:c"]);
        assert_eq!(names(take_batch(&mut q)), ["-:b"]);
        assert_eq!(names(take_batch(&mut q)), ["x:b"]);
        assert!(take_batch(&mut q).is_empty());
    }

    #[test]
    fn a_batch_stops_at_its_bound() {
        let mut q: VecDeque<Request> = (0..MAX_BATCH + 3)
            .map(|i| req(None, "k", &format!("n{i}")))
            .collect();
        assert_eq!(take_batch(&mut q).len(), MAX_BATCH);
        assert_eq!(q.len(), 3);
    }
}
