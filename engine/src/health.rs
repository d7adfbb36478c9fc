//! Whether this process should be sent work: one readiness for the whole process, which
//! `/readyz` answers over HTTP and the gRPC Health service answers to workers and load
//! balancers (the broker's `grpc_router`).
//!
//! Two things make a process not ready: it is draining (SIGTERM: it finishes what it holds and
//! takes nothing new), or it cannot reach PostgreSQL. [`Health::watch_database`] pings the
//! primary every [`PING_EVERY`] over a connection of its own (so a pool busy with work is never
//! mistaken for a database gone; a ping that does not answer within [`PING_TIMEOUT`] counts as
//! a failure, so a server that hangs is caught like one that refuses), and the answer flips
//! back as soon as a ping succeeds again. Subscribers ([`Health::subscribe`]) hear every flip.
//! The monitor is the only writer of the database half; draining is for good.

use std::{sync::Arc, time::Duration};

use sqlx::{PgPool, postgres::PgPoolOptions};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How often the database is pinged.
pub const PING_EVERY: Duration = Duration::from_secs(1);
/// How long a ping may take before the database counts as unreachable.
pub const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// The process's readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// Serving.
    Serving,
    /// Shutting down: finishing what it holds, taking nothing new.
    Draining,
    /// PostgreSQL did not answer the last ping.
    DatabaseUnreachable,
}

impl Readiness {
    /// Whether work should be sent here.
    pub fn serving(self) -> bool {
        self == Readiness::Serving
    }

    /// Why not, in words (for a 503's detail and logs).
    pub fn reason(self) -> &'static str {
        match self {
            Readiness::Serving => "serving",
            Readiness::Draining => "draining: shutting down",
            Readiness::DatabaseUnreachable => "database unreachable",
        }
    }
}

/// The process's readiness, shared by everything that reports it. Cheap to clone.
#[derive(Clone)]
pub struct Health {
    inner: Arc<Inner>,
}

struct Inner {
    /// (draining, database reachable), and the readiness they make.
    state: watch::Sender<(bool, bool)>,
    readiness: watch::Sender<Readiness>,
}

impl Default for Health {
    fn default() -> Self {
        Health::new()
    }
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Health").field(&self.readiness()).finish()
    }
}

impl Health {
    /// Serving, with the database presumed reachable (the process just connected and
    /// migrated).
    pub fn new() -> Health {
        Health {
            inner: Arc::new(Inner {
                state: watch::Sender::new((false, true)),
                readiness: watch::Sender::new(Readiness::Serving),
            }),
        }
    }

    fn update(&self, f: impl FnOnce(&mut (bool, bool))) {
        self.inner.state.send_modify(f);
        let (draining, db_ok) = *self.inner.state.borrow();
        let now = if draining {
            Readiness::Draining
        } else if !db_ok {
            Readiness::DatabaseUnreachable
        } else {
            Readiness::Serving
        };
        self.inner.readiness.send_if_modified(|r| {
            if *r == now {
                return false;
            }
            tracing::info!(
                readiness = now.reason(),
                was = r.reason(),
                "readiness changed"
            );
            *r = now;
            true
        });
    }

    /// Marks the process draining, for good.
    pub fn start_draining(&self) {
        self.update(|s| s.0 = true);
    }

    /// Records whether the database answered.
    pub fn set_database(&self, reachable: bool) {
        self.update(|s| s.1 = reachable);
    }

    /// The readiness now.
    pub fn readiness(&self) -> Readiness {
        *self.inner.readiness.borrow()
    }

    /// A receiver that sees every change.
    pub fn subscribe(&self) -> watch::Receiver<Readiness> {
        self.inner.readiness.subscribe()
    }

    /// Pings the database of `pool` every [`PING_EVERY`] until `stop`, recording each answer.
    /// The pings go over one connection of their own, made with `pool`'s options (followed
    /// as they change: a password from `DATABASE_PASSWORD_COMMAND` is swapped into them).
    pub async fn watch_database(self, pool: PgPool, stop: CancellationToken) {
        let main = pool;
        let mut seen = main.connect_options();
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .acquire_timeout(PING_TIMEOUT)
            .connect_lazy_with((*seen).clone());
        loop {
            let now = main.connect_options();
            if !std::sync::Arc::ptr_eq(&now, &seen) {
                pool.set_connect_options((*now).clone());
                seen = now;
            }
            let ok = matches!(
                tokio::time::timeout(PING_TIMEOUT, crate::db::ping(&pool)).await,
                Ok(Ok(()))
            );
            self.set_database(ok);
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(PING_EVERY) => {}
            }
        }
        pool.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draining_wins_and_the_database_flips_back() {
        let h = Health::new();
        let rx = h.subscribe();
        assert_eq!(h.readiness(), Readiness::Serving);
        h.set_database(false);
        assert_eq!(h.readiness(), Readiness::DatabaseUnreachable);
        assert!(rx.has_changed().unwrap());
        h.set_database(true);
        assert_eq!(h.readiness(), Readiness::Serving);
        h.start_draining();
        h.set_database(false);
        assert_eq!(h.readiness(), Readiness::Draining);
        h.set_database(true);
        assert_eq!(h.readiness(), Readiness::Draining);
    }
}
