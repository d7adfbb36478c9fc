//! The banner `converge dev` prints once every listener is bound: where the UI, the API and
//! the broker are, and the lines a second shell needs (`CONVERGE_SERVER` for conctl,
//! `BROKER_ADDR` for a worker). A server started by `serve` logs the same facts as fields.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The bound addresses and whether each speaks TLS.
pub struct Doors {
    /// The HTTP listener (UI and API, or probes only on a broker pod).
    pub http: SocketAddr,
    /// Whether the HTTP listener serves TLS.
    pub http_tls: bool,
    /// The broker's gRPC listener, when this process runs the broker.
    pub broker: Option<SocketAddr>,
    /// Whether the broker's listener serves TLS.
    pub grpc_tls: bool,
    /// Whether callers must present a credential (AUTH_FILE).
    pub auth: bool,
}

/// Prints the banner on stdout.
pub fn print(d: &Doors) {
    println!("{}", render(d));
}

/// An address a client on this host can dial: a wildcard listener is reached on loopback.
fn dialable(a: SocketAddr) -> SocketAddr {
    if a.ip().is_unspecified() {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), a.port())
    } else {
        a
    }
}

fn render(d: &Doors) -> String {
    let scheme = |tls: bool| if tls { "https" } else { "http" };
    let web = format!("{}://{}", scheme(d.http_tls), dialable(d.http));
    let mut out = String::from("\nconverge dev is ready\n");
    out += &format!("  UI        {web}/\n");
    out += &format!("  API       {web}/api/v1   (OpenAPI: {web}/openapi.json)\n");
    if let Some(b) = d.broker {
        out += &format!(
            "  broker    {}://{}   (gRPC, for workers)\n",
            scheme(d.grpc_tls),
            dialable(b)
        );
    }
    out += "\nIn another shell:\n";
    out += &format!("  export CONVERGE_SERVER={web}\n");
    if let Some(b) = d.broker {
        out += &format!(
            "  export BROKER_ADDR={}://{}\n",
            scheme(d.grpc_tls),
            dialable(b)
        );
    }
    if d.auth {
        out += "  (AUTH_FILE is set: conctl needs CONVERGE_TOKEN, a worker WORKER_TOKEN_FILE)\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_names_dialable_urls_and_the_export_lines() {
        let b = render(&Doors {
            http: "0.0.0.0:18080".parse().unwrap(),
            http_tls: false,
            broker: Some("127.0.0.1:9090".parse().unwrap()),
            grpc_tls: true,
            auth: false,
        });
        assert!(b.contains("UI        http://127.0.0.1:18080/"), "{b}");
        assert!(
            b.contains("export CONVERGE_SERVER=http://127.0.0.1:18080\n"),
            "{b}"
        );
        assert!(
            b.contains("export BROKER_ADDR=https://127.0.0.1:9090\n"),
            "{b}"
        );
        assert!(!b.contains("AUTH_FILE"), "{b}");
    }
}
