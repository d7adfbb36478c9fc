//! Where the API reads from: the primary, or a streaming replica (`DATABASE_READ_URL`).
//!
//! Each handler decides once, at its top, with a typed [`ReadFrom`]: `AppState::reading`
//! returns the state with its `pool` pointed where the read should go, so every query of the
//! handler (and of the helpers it calls) reads from there, and records where that was for the
//! response's `X-Converge-Read-Source` header ([`read_source_header`]). Lists, summaries,
//! graphs, event feeds and the cluster view choose [`ReadFrom::Replica`]; a single resource's
//! read, everything a write answers, and the watches choose (or keep) the primary, so a caller
//! always sees its own write. A handler that chooses nothing reads the primary.
//!
//! The replica is used only while it is usable: [`Reads::keep_checking`] measures its lag
//! about every second ([`CHECK_EVERY`]) and sets `converge_read_replica_lag_seconds`. A replica
//! that does not answer is bypassed at once; one behind by more than `READ_MAX_LAG` (default
//! 5 s) on two measurements in a row is bypassed (one sample can catch the replay of the first
//! write after a quiet spell and read its age as lag); the first good measurement brings it
//! back. Bypassed, reads go to the primary and say so.
//!
//! Lag is measured against the primary, not by the replica alone: the primary's current WAL
//! position is read first, and a replica that has replayed up to it is not behind (whatever its
//! last replayed commit's age: nothing was written since). Otherwise the lag is the age of the
//! last transaction it replayed. A replica whose WAL stream stopped cannot look caught up.

use std::{
    cell::Cell,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    time::Duration,
};

use axum::{
    extract::{Request, State},
    http::HeaderValue,
    middleware::Next,
    response::Response,
};
use converge_engine::db::{
    self, ConnectError,
    signin::{PasswordRefresher, SignIn},
};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// How often the replica's lag is measured.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);
/// The default of `READ_MAX_LAG`.
pub const DEFAULT_MAX_LAG: Duration = Duration::from_secs(5);
/// Longest one measurement may take before the replica counts as unreachable.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// Measurements over the limit in a row that bypass the replica.
const OVER_LIMIT_SAMPLES: u32 = 2;

/// Where a handler wants to read from: its one decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// The primary: the caller must see its own writes (a single resource's read, what a
    /// write answers, a watch).
    Primary,
    /// The replica when one is configured and usable, else the primary: lists, summaries,
    /// graphs, event feeds, the cluster view.
    Replica,
}

/// Where a read went (the value of `X-Converge-Read-Source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadSource {
    /// The primary.
    Primary,
    /// The streaming replica.
    Replica,
}

impl ReadSource {
    /// The header value: `primary` or `replica`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadSource::Primary => "primary",
            ReadSource::Replica => "replica",
        }
    }
}

/// The response header that says where a request's reads went.
pub const READ_SOURCE_HEADER: &str = "x-converge-read-source";

/// The streaming replica (`DATABASE_READ_URL`), if any, and whether it is usable now. The
/// primary is the caller's own pool: every method that needs it takes it.
#[derive(Clone, Default)]
pub struct Reads {
    replica: Option<Arc<Replica>>,
}

struct Replica {
    pool: PgPool,
    max_lag: Duration,
    usable: AtomicBool,
    /// Consecutive measurements over `max_lag`.
    over: AtomicU32,
}

impl std::fmt::Debug for Reads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reads")
            .field("replica", &self.replica.is_some())
            .field("usable", &self.replica_usable())
            .finish()
    }
}

impl Reads {
    /// Every read from the primary (no `DATABASE_READ_URL`).
    pub fn primary_only() -> Reads {
        Reads::default()
    }

    /// Reads that may go to `replica` (a pool on `DATABASE_READ_URL`) while it is behind the
    /// primary by at most `max_lag`. It counts as usable only after its first good
    /// measurement ([`Reads::check`]).
    pub fn with_replica(replica: PgPool, max_lag: Duration) -> Reads {
        Reads {
            replica: Some(Arc::new(Replica {
                pool: replica,
                max_lag,
                usable: AtomicBool::new(false),
                over: AtomicU32::new(0),
            })),
        }
    }

    /// Stops sending reads to the replica until its next good measurement (about a second):
    /// a read there just failed (it went away, or its pool is exhausted), and the requests
    /// behind it should not wait for the check to notice.
    pub fn suspect_replica(&self) {
        if let Some(r) = &self.replica
            && r.usable.swap(false, Ordering::Relaxed)
        {
            tracing::warn!(
                "a read on the replica failed; reads go to the primary until it answers again"
            );
        }
    }

    /// Whether reads that may use the replica go to it now.
    pub fn replica_usable(&self) -> bool {
        self.replica
            .as_ref()
            .is_some_and(|r| r.usable.load(Ordering::Relaxed))
    }

    /// The pool a read chosen `from` goes to now, and what the response will say of it.
    pub fn choose<'a>(&'a self, primary: &'a PgPool, from: ReadFrom) -> (&'a PgPool, ReadSource) {
        match (&self.replica, from) {
            (Some(r), ReadFrom::Replica) if r.usable.load(Ordering::Relaxed) => {
                (&r.pool, ReadSource::Replica)
            }
            _ => (primary, ReadSource::Primary),
        }
    }

    /// A pool on the replica at `url` that connects lazily (a replica down at boot is
    /// retried by the checks, not fatal), gives up on a connection after 2 s (a dead replica
    /// must not hold a request; the next check bypasses it) and bounds a statement to 30 s.
    /// It signs in as the primary's pool does (`signin`: `DATABASE_PASSWORD_COMMAND`'s
    /// password, or with `DB_IAM_AUTH` a token for the replica's own host), and its
    /// connections live `DATABASE_MAX_CONN_LIFETIME`; the returned refresher keeps the
    /// password fresh and must be run by the caller.
    pub async fn connect_replica(
        url: &str,
        max_connections: u32,
        signin: &SignIn,
    ) -> Result<(PgPool, Option<PasswordRefresher>), ConnectError> {
        use std::str::FromStr;
        let base = sqlx::postgres::PgConnectOptions::from_str(url)?
            .application_name("converge-read")
            .options([("statement_timeout", "30s")]);
        let pool_opts = sqlx::postgres::PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(2));
        db::signed_pool(base, pool_opts, signin, true, false).await
    }

    /// Measures the replica's lag once and decides whether reads may use it. Returns the lag
    /// (`None`: unreachable, or no replica).
    pub async fn check(&self, primary: &PgPool) -> Option<Duration> {
        let r = self.replica.as_ref()?;
        let lag = tokio::time::timeout(CHECK_TIMEOUT, lag(primary, &r.pool))
            .await
            .ok()
            .and_then(Result::ok);
        let metrics = converge_engine::metrics::metrics();
        let was = r.usable.load(Ordering::Relaxed);
        let now = match lag {
            None => {
                metrics.read_replica_lag.set(f64::INFINITY);
                r.over.store(0, Ordering::Relaxed);
                false
            }
            Some(l) => {
                metrics.read_replica_lag.set(l.as_secs_f64());
                if l > r.max_lag {
                    let over = r.over.fetch_add(1, Ordering::Relaxed) + 1;
                    // A replica not yet in use stays out on the first sample too.
                    was && over < OVER_LIMIT_SAMPLES
                } else {
                    r.over.store(0, Ordering::Relaxed);
                    true
                }
            }
        };
        if now != was {
            r.usable.store(now, Ordering::Relaxed);
            match lag {
                Some(l) if now => {
                    tracing::info!(lag = ?l, "reads go to the replica (DATABASE_READ_URL)")
                }
                Some(l) => {
                    tracing::warn!(lag = ?l, max = ?r.max_lag, "the replica lags beyond READ_MAX_LAG; reads go to the primary")
                }
                None => tracing::warn!("the replica does not answer; reads go to the primary"),
            }
        }
        lag
    }

    /// Measures the replica every [`CHECK_EVERY`] until `stop` (nothing without a replica).
    pub async fn keep_checking(self, primary: PgPool, stop: CancellationToken) {
        if self.replica.is_none() {
            return;
        }
        loop {
            self.check(&primary).await;
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(CHECK_EVERY) => {}
            }
        }
    }

    /// Whether the replica has replayed everything the primary has written so far (a read
    /// bounded by a position taken on the primary, like the event log's horizon, must not
    /// read a replica that has not reached it). False without a replica.
    pub async fn replica_caught_up(&self, primary: &PgPool) -> bool {
        let Some(r) = &self.replica else { return false };
        let probe = async {
            let lsn: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
                .fetch_one(primary)
                .await?;
            sqlx::query_scalar::<_, bool>(
                "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)",
            )
            .bind(lsn)
            .fetch_one(&r.pool)
            .await
        };
        matches!(
            tokio::time::timeout(CHECK_TIMEOUT, probe).await,
            Ok(Ok(true))
        )
    }
}

/// How far `replica` is behind `primary` (see the module's docs).
async fn lag(primary: &PgPool, replica: &PgPool) -> sqlx::Result<Duration> {
    let lsn: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(primary)
        .await?;
    let secs: f64 = sqlx::query_scalar(
        "SELECT CASE
                    WHEN NOT pg_is_in_recovery() THEN 0
                    WHEN coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false) THEN 0
                    ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()),
                                  'Infinity')
                END::float8",
    )
    .bind(lsn)
    .fetch_one(replica)
    .await?;
    Ok(Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::MAX))
}

tokio::task_local! {
    /// Where the current request's handler chose to read from (set by `AppState::reading`).
    static READ_SOURCE: Cell<Option<ReadSource>>;
}

/// Records where the current request reads from (outside a request: nothing).
pub(crate) fn record(source: ReadSource) {
    let _ = READ_SOURCE.try_with(|c| c.set(Some(source)));
}

/// Middleware: sets `X-Converge-Read-Source` on every response, from the handler's choice
/// (`primary` when it made none). A server error from a replica read sets the replica aside
/// at once ([`Reads::suspect_replica`]): the next request reads the primary.
pub async fn read_source_header(State(reads): State<Reads>, req: Request, next: Next) -> Response {
    let (mut resp, source) = READ_SOURCE
        .scope(Cell::new(None), async move {
            let resp = next.run(req).await;
            let source = READ_SOURCE.with(Cell::get);
            (resp, source)
        })
        .await;
    let source = source.unwrap_or(ReadSource::Primary);
    if source == ReadSource::Replica && resp.status().is_server_error() {
        reads.suspect_replica();
    }
    resp.headers_mut().insert(
        READ_SOURCE_HEADER,
        HeaderValue::from_static(source.as_str()),
    );
    resp
}
