//! Per-call cost of the host: fresh store + instantiate + reconcile + outcome validation for
//! a tiny WAT guest, plus describe and load (compile vs memory hit).
//!
//! `cargo run --release --example bench [-- CALLS]`

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use common::{Body, World, child, edge, guest, request, test_info};
use converge_wasm_host::{HostConfig, Limits, WasmHost};
use serde_json::json;

fn main() {
    let calls: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let world = World::load();
    let host = WasmHost::new(HostConfig::default()).expect("host");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let status_only = guest(
        &world,
        &test_info(),
        Body::Return(json!({"ok": {"status": "{\"ok\":true}"}})),
    );
    let t = Instant::now();
    let c = host.load(&status_only).expect("load");
    println!("load (compile):            {:?}", t.elapsed());
    let t = Instant::now();
    let _again = host.load(&status_only).expect("load");
    println!("load (memory hit):         {:?}", t.elapsed());

    let children: Vec<_> = (0..125).map(|i| child("leaf", &format!("c{i}"))).collect();
    let edges: Vec<_> = (1..125)
        .map(|i| edge(("leaf", &format!("c{i}")), ("leaf", &format!("c{}", i - 1))))
        .collect();
    let composer = guest(
        &world,
        &test_info(),
        Body::Return(json!({"ok": {"status": "{}", "children": children, "edges": edges}})),
    );
    let composer = host.load(&composer).expect("load");

    let req = request(r#"{"greeting":"hi"}"#);
    let limits = Limits::default();
    rt.block_on(async {
        for (name, comp) in [("status only", &c), ("125 children + 124 edges", &composer)] {
            for _ in 0..500 {
                comp.reconcile(&req, &limits).await.expect("reconcile");
            }
            let t = Instant::now();
            let mut fuel = 0;
            for _ in 0..calls {
                let (r, report) = comp.reconcile_with_report(&req, &limits).await;
                r.expect("reconcile");
                fuel = report.fuel_consumed;
            }
            let per = t.elapsed() / calls;
            println!(
                "reconcile ({name}): {per:?} per call ({:.0} calls/s, {fuel} fuel, pooling={})",
                1.0 / per.as_secs_f64(),
                host.is_pooling()
            );
        }
        let t = Instant::now();
        for _ in 0..calls {
            c.describe().await.expect("describe");
        }
        println!(
            "describe:                  {:?} per call",
            t.elapsed() / calls
        );
    });
}
