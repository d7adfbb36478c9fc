//! Wake-ups for the engine's loops: an in-process [`Notify`] fed by PostgreSQL LISTEN
//! channels, with a failsafe poll and one trailing poll after every wake.
//!
//! NOTIFYs are coalesced by `notify_gated` to one per channel per 50 ms, so a change made
//! inside a window may carry no NOTIFY of its own; polling once more a window after each wake
//! covers it. A missed notify therefore costs latency, never correctness.

use std::{sync::Arc, time::Duration};

use sqlx::{PgPool, postgres::PgListener};
use tokio::{sync::Notify, time::Instant};
use tokio_util::sync::CancellationToken;

/// One window of `notify_gated` plus a margin.
pub const TRAILING_POLL: Duration = Duration::from_millis(60);

/// What a loop waits on between passes.
pub struct WakeLoop {
    notify: Arc<Notify>,
    failsafe: Duration,
    trailing: Option<Instant>,
}

impl WakeLoop {
    /// A loop woken by `notify`, or by `failsafe` when nothing arrives.
    pub fn new(notify: Arc<Notify>, failsafe: Duration) -> Self {
        WakeLoop {
            notify,
            failsafe,
            trailing: None,
        }
    }

    /// Waits for the next pass. Returns false when `shutdown` fired.
    pub async fn wait(&mut self, shutdown: &CancellationToken) -> bool {
        let until = self
            .trailing
            .take()
            .unwrap_or_else(|| Instant::now() + self.failsafe);
        tokio::select! {
            _ = shutdown.cancelled() => false,
            _ = self.notify.notified() => {
                self.trailing = Some(Instant::now() + TRAILING_POLL);
                true
            }
            _ = tokio::time::sleep_until(until) => true,
        }
    }
}

/// Listens on `channels` and calls `on_notify(channel, payload)` for each notification, until
/// `shutdown`. After a lost connection it reconnects and calls `on_notify(channel, "")` for
/// every channel, since notifications sent while disconnected are gone.
pub async fn listen<F>(pool: PgPool, channels: &[&str], on_notify: F, shutdown: CancellationToken)
where
    F: Fn(&str, &str) + Send + Sync,
{
    loop {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "LISTEN connection failed; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        if let Err(e) = listener.listen_all(channels.iter().copied()).await {
            tracing::warn!(error = %e, "LISTEN failed; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        for c in channels {
            on_notify(c, "");
        }
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                n = listener.try_recv() => match n {
                    Ok(Some(n)) => on_notify(n.channel(), n.payload()),
                    Ok(None) => {
                        tracing::warn!("LISTEN connection lost; reconnecting");
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "LISTEN receive failed; reconnecting");
                        break;
                    }
                },
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Spawns [`listen`] on `channels`, waking `notify` on every notification (and after each
/// reconnect). For loops that only need "something changed" on their channels.
pub fn spawn_listen_notify(
    pool: PgPool,
    channels: &'static [&'static str],
    notify: Arc<Notify>,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        listen(pool, channels, move |_, _| notify.notify_one(), shutdown).await;
    })
}
