//! Test helpers (feature `test-util`): starting a real server on free ports and waiting for
//! it to be ready. The database helpers live in `converge_engine::testing` and are
//! re-exported here so a test needs one import.

use std::{future::Future, time::Duration};

pub use converge_engine::testing::{TEST_DATABASE_URL_ENV, TestDb, wait_for};

/// A free loopback port: bound, then released (so only free when it was probed).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
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
pub async fn spawn_ready<F>(what: &str, spawn: F) -> (tokio::process::Child, u16, u16)
where
    F: FnMut(u16, u16) -> tokio::process::Child,
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
pub async fn spawn_ready_tls<F>(
    what: &str,
    ca_pem: &str,
    spawn: F,
) -> (tokio::process::Child, u16, u16)
where
    F: FnMut(u16, u16) -> tokio::process::Child,
{
    spawn_ready_probe(what, spawn, |hp| async move {
        converge_auth::testing::https(hp, ca_pem, "GET", "/readyz", None, None)
            .await
            .is_ok_and(|r| r.status == 200)
    })
    .await
}

async fn spawn_ready_probe<F, P, Fut>(
    what: &str,
    mut spawn: F,
    ready: P,
) -> (tokio::process::Child, u16, u16)
where
    F: FnMut(u16, u16) -> tokio::process::Child,
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
