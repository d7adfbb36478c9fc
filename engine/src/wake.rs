//! Wake-ups for the engine's loops: an in-process [`Notify`] fed by PostgreSQL LISTEN
//! channels, with a failsafe poll and one trailing poll after every wake.
//!
//! NOTIFYs are coalesced by `notify_gated` to one per channel per 50 ms, so a change made
//! inside a window may carry no NOTIFY of its own; polling every [`TRAILING_STEP`] until a
//! window after each wake has passed covers it. A missed notify therefore costs at most a
//! step of latency, never correctness.

use std::{sync::Arc, time::Duration};

use sqlx::{PgPool, postgres::PgListener};
use tokio::{sync::Notify, time::Instant};
use tokio_util::sync::CancellationToken;

/// One window of `notify_gated` plus a margin: how long after a wake the loop keeps polling.
pub const TRAILING_POLL: Duration = Duration::from_millis(60);

/// The poll interval inside the trailing window. One poll at the window's end made a change
/// coalesced into the previous NOTIFY wait up to 60 ms: back-to-back single applies on an
/// idle system (each inside the window of the last) took 50-90 ms to go Ready at p99. A
/// poll that finds nothing is one cheap indexed query, and a loaded loop never waits here.
pub const TRAILING_STEP: Duration = Duration::from_millis(8);

/// What a loop waits on between passes.
pub struct WakeLoop {
    notify: Arc<Notify>,
    failsafe: Duration,
    /// The end of the trailing window opened by the last wake, if it is still open.
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
        let now = Instant::now();
        let until = match self.trailing {
            Some(end) if end > now => (now + TRAILING_STEP).min(end),
            _ => {
                self.trailing = None;
                now + self.failsafe
            }
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// After a wake the loop polls every step until the trailing window closes, then waits
    /// for the failsafe (time is paused: each wait returns exactly at its deadline).
    #[tokio::test(start_paused = true)]
    async fn a_wake_opens_a_window_of_short_polls_then_the_failsafe_applies() {
        let notify = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let failsafe = Duration::from_secs(5);
        let mut wake = WakeLoop::new(notify.clone(), failsafe);
        notify.notify_one();
        assert!(wake.wait(&stop).await);
        let opened = Instant::now();
        let mut polls = 0;
        while Instant::now() < opened + TRAILING_POLL {
            let before = Instant::now();
            assert!(wake.wait(&stop).await);
            assert!(Instant::now() - before <= TRAILING_STEP);
            polls += 1;
        }
        assert_eq!(
            polls,
            TRAILING_POLL
                .as_millis()
                .div_ceil(TRAILING_STEP.as_millis())
        );
        let before = Instant::now();
        assert!(wake.wait(&stop).await);
        assert_eq!(Instant::now() - before, failsafe);
        stop.cancel();
        assert!(!wake.wait(&stop).await);
    }
}
