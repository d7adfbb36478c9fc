//! Per-call cost of the real Rust guest (`tests/fixtures/conformance-guest.wasm`): compile
//! time, and fresh store + instantiate + reconcile + outcome validation for `conf-leaf`
//! work (status only) and `netbom` with 124 subnets (125 children, 124 edges).
//!
//! `cargo run --release --example bench_guest [-- CALLS [GUEST.wasm]]` (another build of the
//! guest can be measured without replacing the fixture).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use converge_wasm_host::{HostConfig, Limits, LoadedComponent, WasmHost, wit};
use serde_json::json;

const GUEST: &[u8] = include_bytes!("../tests/fixtures/conformance-guest.wasm");

/// Median and mean of a set of durations, in microseconds.
fn summary(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let median = us(samples[samples.len() / 2]);
    let mean = samples.iter().map(|d| us(*d)).sum::<f64>() / samples.len() as f64;
    (median, mean)
}

fn request(kind: &str, stage: wit::Stage, spec: serde_json::Value) -> wit::Request {
    let mut r = common::request(&spec.to_string());
    r.kind = kind.into();
    r.target.kind = kind.into();
    r.stage = stage;
    r
}

/// A netbom compose request with `n` subnets.
fn netbom(n: usize) -> wit::Request {
    let subnets: Vec<_> = (0..n)
        .map(|i| json!({"name": format!("s{i}"), "cidr": format!("10.0.{i}.0/24")}))
        .collect();
    request(
        "netbom",
        wit::Stage::Compose,
        json!({
            "prefix": "prod", "region": "eu-west-1", "cidr": "10.0.0.0/16",
            "enabled": true, "subnets": subnets,
        }),
    )
}

fn main() {
    let calls: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000);
    let guest = match std::env::args().nth(2) {
        Some(path) => std::fs::read(&path).expect("read the guest"),
        None => GUEST.to_vec(),
    };
    println!("guest: {} bytes; {calls} calls per figure", guest.len());

    // Compile: a fresh host (no disk cache) per sample, so every load compiles.
    let mut compiles = Vec::new();
    for _ in 0..3 {
        let host = WasmHost::new(HostConfig::default()).expect("host");
        let t = Instant::now();
        let c = host.load(&guest).expect("load");
        compiles.push(t.elapsed());
        drop(c);
    }
    let (median, _) = summary(compiles.clone());
    println!(
        "load (compile):              median {:.1} ms over {} compiles",
        median / 1000.0,
        compiles.len()
    );

    let host = WasmHost::new(HostConfig::default()).expect("host");
    let c = host.load(&guest).expect("load");
    let hits: Vec<_> = (0..20)
        .map(|_| {
            let t = Instant::now();
            let again = host.load(&guest).expect("load");
            let elapsed = t.elapsed();
            drop(again);
            elapsed
        })
        .collect();
    let (median, _) = summary(hits);
    println!("load (memory hit):           median {median:.1} µs (sha256 of the bytes)");

    let cases = [
        (
            "conf-leaf work",
            request("conf-leaf", wit::Stage::Work, json!({"greeting": "hi"})),
        ),
        (
            "netbom, 124 subnets (125 children + 124 edges)",
            netbom(124),
        ),
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let limits = Limits::default();
    rt.block_on(async {
        for (name, req) in &cases {
            run(&c, name, req, &limits, calls).await;
        }
        // Where netbom's fuel goes: per subnet versus fixed.
        for n in [0, 1, 10, 124] {
            let req = netbom(n);
            let (result, report) = c.reconcile_with_report(&req, &limits).await;
            result.expect("reconcile");
            println!(
                "netbom fuel, {n:>3} subnets:    {} ({} bytes of spec)",
                report.fuel_consumed,
                req.target.spec.len()
            );
        }
        let mut samples = Vec::with_capacity(calls);
        for _ in 0..calls {
            let t = Instant::now();
            c.describe().await.expect("describe");
            samples.push(t.elapsed());
        }
        let (median, mean) = summary(samples);
        println!("describe:                    median {median:.1} µs, mean {mean:.1} µs");
    });
    println!("pooling allocator: {}", host.is_pooling());
}

async fn run(c: &LoadedComponent, name: &str, req: &wit::Request, limits: &Limits, calls: usize) {
    for _ in 0..calls.min(500) {
        c.reconcile(req, limits).await.expect("reconcile");
    }
    let mut samples = Vec::with_capacity(calls);
    let mut fuel = 0;
    let t = Instant::now();
    for _ in 0..calls {
        let started = Instant::now();
        let (result, report) = c.reconcile_with_report(req, limits).await;
        samples.push(started.elapsed());
        result.expect("reconcile");
        fuel = report.fuel_consumed;
    }
    let total = t.elapsed();
    let (median, mean) = summary(samples);
    println!(
        "{name}: median {median:.1} µs, mean {mean:.1} µs per call ({:.0} calls/s), {fuel} fuel",
        calls as f64 / total.as_secs_f64()
    );
}
