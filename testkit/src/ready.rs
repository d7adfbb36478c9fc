//! Free ports, polling waits, and starting a server on free ports until it is ready.

use std::{future::Future, time::Duration};

use tokio::process::Child;

/// A free loopback port: bound, then released (so only free when it was probed).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
}

/// Polls `f` every 20 ms until it returns `Some`, and returns that value; the waiting is
/// `tokio::time`, so paused time works.
///
/// # Panics
/// After `timeout`, naming `what` was waited for.
pub async fn wait_for<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = f().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts a server with `spawn(http_port, grpc_port)` on two free ports and waits until
/// `GET http://127.0.0.1:{http_port}/readyz` answers 200; returns the child and the ports.
///
/// A probed port can be taken by another test's process before the server binds it: the server
/// then exits, and it is started again on new ports (three attempts) rather than waited for
/// until the 30 s timeout.
///
/// # Panics
/// If the server is not ready within 30 s, or exits three times first.
pub async fn spawn_ready<F>(what: &str, spawn: F) -> (Child, u16, u16)
where
    F: FnMut(u16, u16) -> Child,
{
    let client = reqwest::Client::new();
    spawn_ready_probe(what, spawn, |hp| {
        let (client, url) = (client.clone(), format!("http://127.0.0.1:{hp}/readyz"));
        async move {
            client
                .get(&url)
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        }
    })
    .await
}

/// [`spawn_ready`] for a server on TLS (`TLS_CERT_FILE`): `/readyz` is polled over HTTPS,
/// trusting `ca_pem`.
#[cfg(feature = "tls")]
pub async fn spawn_ready_tls<F>(what: &str, ca_pem: &str, spawn: F) -> (Child, u16, u16)
where
    F: FnMut(u16, u16) -> Child,
{
    spawn_ready_probe(what, spawn, |hp| async move {
        converge_auth::testing::https(hp, ca_pem, "GET", "/readyz", None, None)
            .await
            .is_ok_and(|r| r.status == 200)
    })
    .await
}

/// [`spawn_ready`] with the readiness check `ready(http_port)` of the caller's choosing.
///
/// # Panics
/// As [`spawn_ready`].
pub async fn spawn_ready_probe<F, P, Fut>(what: &str, mut spawn: F, ready: P) -> (Child, u16, u16)
where
    F: FnMut(u16, u16) -> Child,
    P: Fn(u16) -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..3 {
        let (hp, gp) = (free_port(), free_port());
        let mut child = spawn(hp, gp);
        let outcome = wait_for(Duration::from_secs(30), what, || {
            let exited = child.try_wait().ok().flatten();
            let probe = ready(hp);
            async move {
                if let Some(status) = exited {
                    return Some(Err(status));
                }
                probe.await.then_some(Ok(()))
            }
        })
        .await;
        match outcome {
            Ok(()) => return (child, hp, gp),
            Err(status) => eprintln!("{what}: the server exited ({status}); starting it again"),
        }
    }
    panic!("{what}: the server exited three times before it was ready");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_server_that_keeps_exiting_is_started_three_times() {
        let mut starts = 0;
        let run = tokio::spawn(async move {
            spawn_ready_probe(
                "a server that exits",
                |_, _| {
                    starts += 1;
                    assert!(starts <= 3, "started a fourth time");
                    tokio::process::Command::new("true").spawn().unwrap()
                },
                |_| async { false },
            )
            .await
        });
        let err = run.await.expect_err("it panics");
        assert!(err.is_panic());
    }

    #[tokio::test]
    async fn a_ready_server_is_returned_with_its_ports() {
        let (mut child, hp, gp) = spawn_ready_probe(
            "a ready server",
            |_, _| {
                tokio::process::Command::new("sleep")
                    .arg("30")
                    .kill_on_drop(true)
                    .spawn()
                    .unwrap()
            },
            |_| async { true },
        )
        .await;
        assert_ne!(hp, gp);
        child.kill().await.unwrap();
    }
}
