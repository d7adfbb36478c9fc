//! `oidc-test-issuer`: the tests' OIDC issuer ([`converge_auth::testing::issuer`]) as a
//! process, for the browser tests of the web UI (ui/e2e), which start it before converge.
//! Built only with the `test-util` feature:
//!
//! ```sh
//! cargo build --locked -p converge-auth --features test-util --bin oidc-test-issuer
//! oidc-test-issuer [--port N] [--client-id converge-ui]
//! ```
//!
//! Prints one JSON line on stdout once it listens, `{"url": ..., "expired_token": ...}` (an
//! ID token of `vera` for the client that expired an hour ago, signed with the issuer's key,
//! so a test can see how converge and the UI treat an expired sign-in), then serves until
//! SIGTERM or SIGINT. Its people: `vera` (viewer), `otto` (operator), `ada` (admin).

use converge_auth::testing::issuer::Issuer;
use serde_json::json;

fn usage(why: &str) -> ! {
    eprintln!("oidc-test-issuer: {why}\nusage: oidc-test-issuer [--port N] [--client-id ID]");
    std::process::exit(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut port = 0u16;
    let mut client_id = "converge-ui".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--port" => {
                port = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--port takes a number"))
            }
            "--client-id" => client_id = value(),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    let issuer = Issuer::start_on(port).await;
    let now = converge_auth::oidc::now_secs();
    let mut claims = issuer.claims("vera", &client_id, json!(["viewer"]));
    claims["iat"] = json!(now - 4200);
    claims["exp"] = json!(now - 3600);
    println!(
        "{}",
        json!({"url": issuer.url, "expired_token": issuer.key().sign(&claims)})
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .unwrap_or_else(|e| usage(&format!("cannot wait for SIGTERM: {e}")));
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
