//! Watches of the event log (`resource_events`) for the API's `?watch=true` streams.
//!
//! One [`WatchHub`] per process tails the log: a single loop reads new events up to the safe
//! horizon (`db::events::log_head` says why ids alone are not a safe cursor, and how the
//! horizon is found) and broadcasts them in [`Batch`]es to every watch, so a thousand watches
//! cost one reader and no database connection each. The engine sends no NOTIFY on events
//! (they are written on the drain's hot path), so the tail polls: every [`ACTIVE_POLL`] while
//! a watch is open, one cheap read of the sequence when nothing happened; with no watch open
//! it does nothing until one asks.
//!
//! A [`Watch`] starts at a cursor: what the client last saw (`Last-Event-ID`), or a horizon at
//! least as new as the log was when it opened. It first reads the log from its cursor up to
//! the horizon it found when it subscribed, then follows the broadcast; each batch covers
//! `(from, to]` of the log with no hole between consecutive batches, so the two hand over with
//! no gap, and ids at or below the cursor are skipped, so with no duplicate either. A watch
//! that falls behind the broadcast (its buffer is [`BROADCAST_BATCHES`] batches) reads the log
//! again from its own cursor instead of losing events. At most `max_watchers` are open.

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex,
        atomic::{AtomicI64, Ordering},
    },
    time::Duration,
};

use sqlx::PgPool;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::db::events::{self, Event, EventFilter};

/// How often the tail looks for new events while a watch is open (the latency it adds).
pub const ACTIVE_POLL: Duration = Duration::from_millis(200);
/// Events read per statement, by the tail and by a watch catching up.
pub const PAGE: i64 = 1000;
/// Batches the broadcast keeps for a slow watch before it must read the log itself.
pub const BROADCAST_BATCHES: usize = 32;
/// Horizon candidates waiting on older transactions; past this, new heads wait their turn.
const MAX_CANDIDATES: usize = 64;
/// How long [`WatchHub::horizon`] waits for the transactions in flight before it settles for
/// the last horizon published (older, still safe).
pub const HORIZON_WAIT: Duration = Duration::from_secs(5);

/// The hub's limits.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    /// Most watches open at once (`MAX_WATCHERS`).
    pub max_watchers: usize,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig { max_watchers: 256 }
    }
}

/// A stretch of the log: every committed event with `from < id <= to`.
#[derive(Debug)]
pub struct Batch {
    /// The horizon before this batch.
    pub from: i64,
    /// The horizon after it.
    pub to: i64,
    /// The events, ascending.
    pub events: Vec<Arc<Event>>,
}

/// Why a watch could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// `max_watchers` watches are open.
    #[error("{0} watches are open, the most this server allows (MAX_WATCHERS)")]
    Full(usize),
    /// The server is shutting down.
    #[error("the server is shutting down")]
    Stopping,
    /// No horizon is known yet, and a transaction has held it back for [`HORIZON_WAIT`].
    #[error("the event log is held back by a long-running transaction; retry later")]
    HeldBack,
    /// The log could not be read.
    #[error("reading the event log failed: {0}")]
    Db(#[from] sqlx::Error),
}

/// The process's one tail of the event log and its watches.
pub struct WatchHub {
    pool: PgPool,
    /// The published horizon (`None` until the first). Moved, with the batch that ends there
    /// sent, under the lock a watch subscribes under: see [`WatchHub::open`].
    horizon: Mutex<Option<i64>>,
    /// The published horizon, for those waiting for it to pass a point.
    published: watch::Sender<Option<i64>>,
    /// The newest log head someone waits to see under the horizon: the tail runs until then.
    wanted: AtomicI64,
    tx: broadcast::Sender<Arc<Batch>>,
    slots: Arc<Semaphore>,
    max_watchers: usize,
    /// Someone opened a watch or wants a horizon: poll now.
    wake: Notify,
    stop: CancellationToken,
}

impl WatchHub {
    /// A hub over `pool` with its tail running (a task of its own); the tail and every watch
    /// end when `stop` fires.
    pub fn start(pool: PgPool, cfg: WatchConfig, stop: CancellationToken) -> Arc<WatchHub> {
        let max = cfg.max_watchers.max(1);
        let hub = Arc::new(WatchHub {
            pool,
            horizon: Mutex::new(None),
            published: watch::Sender::new(None),
            wanted: AtomicI64::new(0),
            tx: broadcast::Sender::new(BROADCAST_BATCHES),
            slots: Arc::new(Semaphore::new(max)),
            max_watchers: max,
            wake: Notify::new(),
            stop,
        });
        tokio::spawn(hub.clone().run());
        hub
    }

    /// How many watches are open.
    pub fn open_watches(&self) -> usize {
        self.max_watchers - self.slots.available_permits()
    }

    fn current(&self) -> Option<i64> {
        *self.horizon.lock().expect("horizon lock")
    }

    /// A safe horizon: every event at or below it that will ever commit has. It is at least
    /// as new as the log is now (every event committed before this call is at or below it)
    /// unless the transactions in flight take longer than [`HORIZON_WAIT`] to end: then it is
    /// the last one published, older but as safe.
    pub async fn horizon(&self) -> Result<i64, OpenError> {
        let head = events::log_head(&self.pool).await?;
        self.wanted.fetch_max(head, Ordering::SeqCst);
        let mut published = self.published.subscribe();
        self.wake.notify_one();
        let reached = published.wait_for(|h| h.is_some_and(|h| h >= head));
        tokio::select! {
            _ = self.stop.cancelled() => Err(OpenError::Stopping),
            _ = tokio::time::timeout(HORIZON_WAIT, reached) => {
                self.current().ok_or(OpenError::HeldBack)
            }
        }
    }

    /// Opens a watch of the events `filter` passes, after `cursor` (default: now, see
    /// [`WatchHub::horizon`]).
    pub async fn open(
        self: &Arc<Self>,
        filter: EventFilter,
        cursor: Option<i64>,
    ) -> Result<Watch, OpenError> {
        let permit = self
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| OpenError::Full(self.max_watchers))?;
        let now = self.horizon().await?;
        // Subscribe and read the horizon under the lock `publish` holds while it moves the
        // horizon and sends the batch that ends there: every batch this watch misses ends at
        // or below `h`, every later one starts at the horizon before it, so the log read up
        // to `h` and the batches after it meet.
        let (rx, h) = {
            let g = self.horizon.lock().expect("horizon lock");
            (self.tx.subscribe(), g.expect("published").max(now))
        };
        self.wake.notify_one();
        let cursor = cursor.unwrap_or(now);
        Ok(Watch {
            hub: self.clone(),
            rx,
            filter,
            start: cursor,
            cursor,
            read_to: h,
            pending: VecDeque::new(),
            _permit: permit,
        })
    }

    /// Moves the horizon to `safe`: with no watch subscribed it just moves, else the events
    /// up to it are read and sent in batches of at most [`PAGE`].
    async fn publish(&self, safe: i64) -> Result<(), sqlx::Error> {
        loop {
            let from = {
                let mut g = self.horizon.lock().expect("horizon lock");
                match *g {
                    Some(h) if h >= safe => return Ok(()),
                    Some(h) if self.tx.receiver_count() > 0 => h,
                    // The first horizon, or nobody to send to: a watch that subscribes next
                    // reads the log up to the new horizon itself.
                    _ => {
                        *g = Some(safe);
                        self.published.send_replace(Some(safe));
                        return Ok(());
                    }
                }
            };
            let rows =
                events::events_between(&self.pool, &EventFilter::default(), from, safe, PAGE)
                    .await?;
            let to = match rows.last() {
                Some(last) if rows.len() as i64 == PAGE => last.id,
                _ => safe,
            };
            let batch = Arc::new(Batch {
                from,
                to,
                events: rows.into_iter().map(Arc::new).collect(),
            });
            {
                let mut g = self.horizon.lock().expect("horizon lock");
                *g = Some(to);
                // No receiver left is fine: the next watch reads the log up to `to`.
                let _ = self.tx.send(batch);
            }
            self.published.send_replace(Some(to));
            if to >= safe {
                return Ok(());
            }
        }
    }

    /// Whether anyone needs the tail: an open watch, or a horizon asked for and not reached.
    fn needed(&self) -> bool {
        self.tx.receiver_count() > 0
            || self
                .current()
                .is_none_or(|h| h < self.wanted.load(Ordering::SeqCst))
    }

    /// One poll: reads the log's head, turns heads whose writers have all finished into the
    /// horizon (`db::events::log_head`, steps 1 to 3), and publishes up to it.
    async fn poll(&self, candidates: &mut VecDeque<(i64, i64)>) -> Result<(), sqlx::Error> {
        let head = events::log_head(&self.pool).await?;
        let newest = candidates.back().map(|c| c.0).or(self.current());
        // A new head needs a fence (a transaction id); a quiet log costs only the read above.
        if newest.is_none_or(|n| head > n) && candidates.len() < MAX_CANDIDATES {
            let fence = events::xact_fence(&self.pool).await?;
            candidates.push_back((head, fence));
        }
        if candidates.is_empty() {
            return Ok(());
        }
        let oldest = events::oldest_running_xact(&self.pool).await?;
        let mut safe = None;
        while let Some(&(head, fence)) = candidates.front()
            && oldest >= fence
        {
            safe = Some(head);
            candidates.pop_front();
        }
        match safe {
            Some(safe) => self.publish(safe).await,
            None => Ok(()),
        }
    }

    /// The tail, until the hub's `stop`.
    async fn run(self: Arc<Self>) {
        // (log head, fence) pairs, oldest first, both ascending.
        let mut candidates = VecDeque::new();
        while !self.stop.is_cancelled() {
            if !self.needed() {
                // Nobody is waiting: stale candidates would only delay the next one.
                candidates.clear();
                tokio::select! {
                    _ = self.stop.cancelled() => return,
                    _ = self.wake.notified() => {}
                }
                continue;
            }
            if let Err(e) = self.poll(&mut candidates).await {
                tracing::warn!(error = %e, "watch: reading the event log failed");
            }
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(ACTIVE_POLL) => {}
            }
        }
    }
}

/// One open watch: the events its filter passes, in log order, each once.
pub struct Watch {
    hub: Arc<WatchHub>,
    rx: broadcast::Receiver<Arc<Batch>>,
    filter: EventFilter,
    start: i64,
    /// The log position up to which this watch has queued everything it passes.
    cursor: i64,
    /// Read the log itself (not the broadcast) while `cursor` is below this.
    read_to: i64,
    pending: VecDeque<Arc<Event>>,
    _permit: OwnedSemaphorePermit,
}

impl Watch {
    /// Where the watch started (the position a client resumes from if nothing came yet).
    pub fn start(&self) -> i64 {
        self.start
    }

    /// The next events (at least one), or `None` once the server stops. An error (the log
    /// could not be read) ends the watch; the client resumes from the last id it got.
    pub async fn next(&mut self) -> Option<Result<Vec<Arc<Event>>, sqlx::Error>> {
        loop {
            if !self.pending.is_empty() {
                return Some(Ok(self.pending.drain(..).collect()));
            }
            if self.cursor < self.read_to {
                let page = match events::events_between(
                    &self.hub.pool,
                    &self.filter,
                    self.cursor,
                    self.read_to,
                    PAGE,
                )
                .await
                {
                    Ok(p) => p,
                    Err(e) => return Some(Err(e)),
                };
                self.cursor = match page.last() {
                    Some(last) if page.len() as i64 == PAGE => last.id,
                    _ => self.read_to,
                };
                self.pending.extend(page.into_iter().map(Arc::new));
                continue;
            }
            let got = tokio::select! {
                _ = self.hub.stop.cancelled() => return None,
                got = self.rx.recv() => got,
            };
            match got {
                Ok(b) if b.from > self.cursor => {
                    // Not expected (batches are contiguous), but never a gap: read it.
                    self.read_to = b.to;
                }
                Ok(b) => {
                    let (cursor, filter) = (self.cursor, &self.filter);
                    self.pending.extend(
                        b.events
                            .iter()
                            .filter(|e| e.id > cursor && filter.matches(e))
                            .cloned(),
                    );
                    self.cursor = self.cursor.max(b.to);
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::debug!(skipped = n, "watch: fell behind; reading the log");
                    self.read_to = self.hub.current().unwrap_or(self.cursor);
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}
