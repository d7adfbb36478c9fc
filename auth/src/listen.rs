//! The accept loop every converge port shares (HTTP API, probes, WorkerService; plain or TLS),
//! and the bounds that keep a connection flood from taking a process down.
//!
//! - **One descriptor budget** ([`Budget`]) for all of a process's listeners: at most
//!   `max` connections at once (by default the descriptor limit less a reserve for the
//!   database pool and files), at most `max_per_peer` from one IP address.
//! - **Silent connections make room.** A connection that has not sent a byte yet is the
//!   cheapest thing an attacker can open; when the budget (or the peer's share) is full, the
//!   oldest silent one is closed to admit the newcomer, so a probe of `/readyz` or a real
//!   worker gets in while a flood of idle sockets is still open. Only when nothing can be
//!   evicted is a newcomer refused (closed at once).
//! - **Timeouts.** A connection silent for [`FIRST_BYTE_TIMEOUT`] after it opened, or with no
//!   byte either way for `idle_timeout`, is closed. Live gRPC connections are never idle: the
//!   broker pings them every few seconds.
//! - **EMFILE backs off.** An accept that fails (out of descriptors, out of memory) pauses
//!   with a growing delay instead of spinning a core on the same error.
//!
//! A connection is closed by marking its [`Guarded`] I/O closed and waking its reader, so the
//! server task serving it (hyper, h2) sees an error on its next read and drops the socket.

use std::{
    collections::{BTreeMap, HashMap},
    io,
    net::{IpAddr, SocketAddr},
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use futures::task::AtomicWaker;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

/// Longest a new connection may stay silent (no TLS ClientHello, no request byte).
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(10);

/// Descriptors kept out of the connection budget for the database pool, LISTEN connections,
/// files and child processes.
const FD_RESERVE: u64 = 256;

/// The limits of one process's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once, across every listener sharing the budget.
    pub max: usize,
    /// Connections open at once from one IP address.
    pub max_per_peer: usize,
    /// A connection with no byte read or written for this long is closed.
    pub idle_timeout: Duration,
}

impl Limits {
    /// Defaults derived from the process's descriptor limit (`RLIMIT_NOFILE`, read after
    /// [`raise_nofile`]): `max` leaves a reserve of descriptors for everything else, one peer
    /// may hold half of it, and idle connections close after 60 s.
    pub fn from_nofile(nofile: u64) -> Limits {
        let reserve = FD_RESERVE.min(nofile / 4);
        let max = usize::try_from(nofile.saturating_sub(reserve).max(16)).unwrap_or(usize::MAX);
        Limits {
            max,
            max_per_peer: (max / 2).max(8),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (capped at 1,048,576) and returns the
/// resulting soft limit. Service managers commonly start processes at 1,024, which a few
/// hundred idle peers exhaust.
pub fn raise_nofile() -> u64 {
    match rlimit::increase_nofile_limit(1 << 20) {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read or raise RLIMIT_NOFILE; assuming 1024");
            1024
        }
    }
}

/// One admitted connection's shared state (read by the sweeper, written by its I/O).
#[derive(Debug)]
struct ConnState {
    peer: IpAddr,
    opened: Instant,
    /// Milliseconds after `opened` of the last byte read or written.
    last_io_ms: AtomicU64,
    /// Milliseconds after `opened` of the last byte read (meaningful once `spoke`).
    last_read_ms: AtomicU64,
    spoke: AtomicBool,
    closed: AtomicBool,
    reader: AtomicWaker,
}

impl ConnState {
    fn since_opened_ms(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn touch(&self) {
        self.last_io_ms
            .store(self.since_opened_ms(), Ordering::Relaxed);
    }

    /// A byte came from the peer.
    fn heard(&self) {
        let ms = self.since_opened_ms();
        self.last_io_ms.store(ms, Ordering::Relaxed);
        self.last_read_ms.store(ms, Ordering::Relaxed);
        self.spoke.store(true, Ordering::Relaxed);
    }

    fn idle_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.opened)
            .saturating_sub(Duration::from_millis(
                self.last_io_ms.load(Ordering::Relaxed),
            ))
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.reader.wake();
    }
}

#[derive(Default)]
struct Table {
    next_id: u64,
    /// Open connections by id; ids grow, so the first entries are the oldest.
    conns: BTreeMap<u64, Arc<ConnState>>,
    per_peer: HashMap<IpAddr, usize>,
}

impl Table {
    fn remove(&mut self, id: u64) -> Option<Arc<ConnState>> {
        let c = self.conns.remove(&id)?;
        if let Some(n) = self.per_peer.get_mut(&c.peer) {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&c.peer);
            }
        }
        Some(c)
    }

    /// Closes the oldest connection that never spoke (from `peer` only, if given).
    fn evict_silent(&mut self, peer: Option<IpAddr>) -> bool {
        let victim = self
            .conns
            .iter()
            .find(|(_, c)| !c.spoke.load(Ordering::Relaxed) && peer.is_none_or(|p| p == c.peer))
            .map(|(id, _)| *id);
        match victim.and_then(|id| self.remove(id)) {
            Some(c) => {
                c.close();
                true
            }
            None => false,
        }
    }
}

/// The connection budget shared by a process's listeners.
#[derive(Clone)]
pub struct Budget {
    inner: Arc<BudgetInner>,
}

struct BudgetInner {
    limits: Limits,
    table: Mutex<Table>,
    evicted: AtomicU64,
    refused: AtomicU64,
}

impl Budget {
    /// A budget with `limits`; runs its timeout sweeper until `stop`.
    pub fn new(limits: Limits, stop: CancellationToken) -> Budget {
        let b = Budget {
            inner: Arc::new(BudgetInner {
                limits,
                table: Mutex::new(Table::default()),
                evicted: AtomicU64::new(0),
                refused: AtomicU64::new(0),
            }),
        };
        tokio::spawn(b.clone().sweep(stop));
        b
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.table().conns.len()
    }

    /// Connections closed to make room, and newcomers refused, since start.
    pub fn shed(&self) -> (u64, u64) {
        (
            self.inner.evicted.load(Ordering::Relaxed),
            self.inner.refused.load(Ordering::Relaxed),
        )
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.inner.table.lock().expect("connection table poisoned")
    }

    /// Admits a connection from `peer`, evicting the oldest silent one if the budget or the
    /// peer's share is full; `None` if there is no room even so.
    fn admit(&self, peer: IpAddr) -> Option<(u64, Arc<ConnState>)> {
        let limits = self.inner.limits;
        let mut t = self.table();
        if t.per_peer.get(&peer).copied().unwrap_or(0) >= limits.max_per_peer {
            if !t.evict_silent(Some(peer)) {
                self.inner.refused.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            self.inner.evicted.fetch_add(1, Ordering::Relaxed);
        }
        if t.conns.len() >= limits.max {
            if !t.evict_silent(None) {
                self.inner.refused.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            self.inner.evicted.fetch_add(1, Ordering::Relaxed);
        }
        t.next_id += 1;
        let id = t.next_id;
        let state = Arc::new(ConnState {
            peer,
            opened: Instant::now(),
            last_io_ms: AtomicU64::new(0),
            last_read_ms: AtomicU64::new(0),
            spoke: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            reader: AtomicWaker::new(),
        });
        t.conns.insert(id, state.clone());
        *t.per_peer.entry(peer).or_default() += 1;
        Some((id, state))
    }

    /// Closes connections past their first-byte or idle timeout, once a second.
    async fn sweep(self, stop: CancellationToken) {
        let idle = self.inner.limits.idle_timeout;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            let now = Instant::now();
            let mut t = self.table();
            let expired: Vec<u64> = t
                .conns
                .iter()
                .filter(|(_, c)| {
                    let silent = !c.spoke.load(Ordering::Relaxed);
                    (silent && now.saturating_duration_since(c.opened) > FIRST_BYTE_TIMEOUT)
                        || c.idle_for(now) > idle
                })
                .map(|(id, _)| *id)
                .collect();
            for id in expired {
                if let Some(c) = t.remove(id) {
                    c.close();
                }
            }
        }
    }
}

/// A connection's I/O under the budget: counts activity, and fails once the connection was
/// closed by the sweeper or evicted. Dropping it returns its slot.
pub struct Guarded<T> {
    io: T,
    id: u64,
    state: Arc<ConnState>,
    budget: Budget,
}

impl<T> Guarded<T> {
    /// The wrapped I/O.
    pub fn get_ref(&self) -> &T {
        &self.io
    }

    /// What this connection's reads say about its peer.
    pub fn activity(&self) -> ConnActivity {
        ConnActivity(self.state.clone())
    }

    fn check(&self) -> io::Result<()> {
        if self.state.closed.load(Ordering::Relaxed) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection closed: idle, silent or evicted to make room",
            ));
        }
        Ok(())
    }
}

impl<T> Drop for Guarded<T> {
    fn drop(&mut self) {
        self.budget.table().remove(self.id);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.state.reader.register(cx.waker());
        this.check()?;
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.state.heard();
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check()?;
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.state.touch();
        }
        r
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check()?;
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.state.touch();
        }
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// When a connection's peer last sent a byte: the one sign of life of a worker that is
/// visible per connection. The broker pings every idle gRPC connection (HTTP/2 PING, see
/// `converge_broker::KEEPALIVE_INTERVAL`), and the PONG is bytes read here, so a peer whose
/// process runs answers within an interval while a stopped one (SIGSTOP, a frozen VM) sends
/// nothing at all. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ConnActivity(Arc<ConnState>);

impl ConnActivity {
    /// Whether the peer sent at least one byte after `t` (a frame, or the answer to one of
    /// the server's HTTP/2 PINGs). Read at millisecond resolution, rounded down: a byte in
    /// the same millisecond as `t` does not count.
    pub fn heard_since(&self, t: Instant) -> bool {
        let s = &self.0;
        s.spoke.load(Ordering::Relaxed)
            && s.opened + Duration::from_millis(s.last_read_ms.load(Ordering::Relaxed)) > t
    }
}

/// A plain connection tells the WorkerService who is calling (the address; no certificate)
/// and what its reads say about the peer.
impl tonic::transport::server::Connected for Guarded<TcpStream> {
    type ConnectInfo = crate::tls::PeerInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        crate::tls::PeerInfo {
            remote_addr: self
                .io
                .peer_addr()
                .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))),
            spiffe_ids: Arc::new([]),
            activity: Some(self.activity()),
        }
    }
}

/// A TCP listener whose connections are admitted through a [`Budget`].
pub struct GuardedListener {
    listener: TcpListener,
    budget: Budget,
    backoff: Duration,
}

impl GuardedListener {
    /// Wraps `listener` under `budget`.
    pub fn new(listener: TcpListener, budget: Budget) -> GuardedListener {
        GuardedListener {
            listener,
            budget,
            backoff: MIN_BACKOFF,
        }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The next admitted connection (with `TCP_NODELAY`: small request/response frames
    /// otherwise wait ~40 ms for Nagle plus delayed ACKs). Never fails: accept errors back
    /// off, refused newcomers are closed.
    pub async fn accept(&mut self) -> (Guarded<TcpStream>, SocketAddr) {
        loop {
            let (tcp, addr) = match self.listener.accept().await {
                Ok(a) => {
                    self.backoff = MIN_BACKOFF;
                    a
                }
                Err(e) => {
                    if !is_per_connection(&e) {
                        tracing::warn!(error = %e, pause = ?self.backoff, "accept failed; pausing");
                        tokio::time::sleep(self.backoff).await;
                        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
                    }
                    continue;
                }
            };
            let Some((id, state)) = self.budget.admit(addr.ip()) else {
                tracing::debug!(peer = %addr, "connection refused: the budget is full of active connections");
                continue;
            };
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot set TCP_NODELAY");
            }
            let io = Guarded {
                io: tcp,
                id,
                state,
                budget: self.budget.clone(),
            };
            return (io, addr);
        }
    }

    /// The connections as a stream for tonic's `serve_with_incoming`.
    pub fn into_stream(
        self,
    ) -> impl futures::Stream<Item = io::Result<Guarded<TcpStream>>> + Send + 'static {
        futures::stream::unfold(self, |mut l| async move {
            let (io, _) = l.accept().await;
            Some((Ok(io), l))
        })
    }
}

impl axum::serve::Listener for GuardedListener {
    type Io = Guarded<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, SocketAddr) {
        GuardedListener::accept(self).await
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

const MIN_BACKOFF: Duration = Duration::from_millis(5);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Errors that concern one connection only (the peer gave up before we accepted): retry at
/// once.
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn limits_leave_a_reserve_below_the_descriptor_limit() {
        let l = Limits::from_nofile(1024);
        assert_eq!(l.max, 768);
        assert_eq!(l.max_per_peer, 384);
        let small = Limits::from_nofile(64);
        assert_eq!(small.max, 48);
        assert!(Limits::from_nofile(1 << 20).max > 1_000_000);
    }

    #[tokio::test]
    async fn a_full_budget_evicts_the_oldest_silent_connection() {
        let stop = CancellationToken::new();
        let b = Budget::new(
            Limits {
                max: 3,
                max_per_peer: 3,
                idle_timeout: Duration::from_secs(60),
            },
            stop.clone(),
        );
        let (_, a) = b.admit(ip(1)).unwrap();
        let (_, talker) = b.admit(ip(2)).unwrap();
        talker.spoke.store(true, Ordering::Relaxed);
        let (_, c) = b.admit(ip(3)).unwrap();
        // Full: the oldest silent one (a) makes room, not the one that spoke.
        let (_, d) = b.admit(ip(4)).unwrap();
        assert!(a.closed.load(Ordering::Relaxed));
        assert!(!talker.closed.load(Ordering::Relaxed));
        assert_eq!(b.open(), 3);
        // Everyone speaks: nothing can be evicted, the newcomer is refused.
        c.spoke.store(true, Ordering::Relaxed);
        d.spoke.store(true, Ordering::Relaxed);
        assert!(b.admit(ip(5)).is_none());
        assert_eq!(b.shed(), (1, 1));
        stop.cancel();
    }

    #[tokio::test]
    async fn one_peer_cannot_take_more_than_its_share() {
        let stop = CancellationToken::new();
        let b = Budget::new(
            Limits {
                max: 100,
                max_per_peer: 2,
                idle_timeout: Duration::from_secs(60),
            },
            stop.clone(),
        );
        let (_, first) = b.admit(ip(1)).unwrap();
        let (_, second) = b.admit(ip(1)).unwrap();
        second.spoke.store(true, Ordering::Relaxed);
        let other = b.admit(ip(2)).unwrap();
        // The peer's third connection replaces its own oldest silent one, not another peer's.
        b.admit(ip(1)).unwrap();
        assert!(first.closed.load(Ordering::Relaxed));
        assert!(!other.1.closed.load(Ordering::Relaxed));
        stop.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn silent_and_idle_connections_time_out() {
        let stop = CancellationToken::new();
        let b = Budget::new(
            Limits {
                max: 10,
                max_per_peer: 10,
                idle_timeout: Duration::from_secs(30),
            },
            stop.clone(),
        );
        let (_, silent) = b.admit(ip(1)).unwrap();
        let (_, talker) = b.admit(ip(2)).unwrap();
        talker.spoke.store(true, Ordering::Relaxed);
        tokio::time::sleep(FIRST_BYTE_TIMEOUT + Duration::from_secs(2)).await;
        assert!(
            silent.closed.load(Ordering::Relaxed),
            "silent past the first-byte timeout"
        );
        assert!(!talker.closed.load(Ordering::Relaxed));
        assert_eq!(b.open(), 1);
        stop.cancel();
    }
}
