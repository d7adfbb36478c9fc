//! What the Python guest (componentize-py, `guests/python/app.py`) costs the host: compile
//! time, disk-cache load time, and per call (fresh store + instantiate + reconcile + lift +
//! outcome validation) the median and mean for `netbom` with 3 and with 124 subnets.
//!
//! ```sh
//! guests/build-python.sh
//! CARGO_TARGET_DIR=$HOME/.cache/converge-target-wasm \
//!     cargo run --release --features python-guest --example bench_python [-- CALLS]
//! ```
//!
//! The component comes from `$CONVERGE_PYTHON_GUEST` (default
//! `$HOME/.cache/converge-wasm/python-guest.wasm`). The disk cache is a fresh temporary
//! directory, so the first load always compiles.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use converge_wasm_host::{HostConfig, Limits, WasmHost, wit};
use serde_json::json;

fn guest_path() -> PathBuf {
    match std::env::var_os("CONVERGE_PYTHON_GUEST") {
        Some(p) => p.into(),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is not set"))
            .join(".cache/converge-wasm/python-guest.wasm"),
    }
}

/// A compose request for a netbom with `subnets` subnets.
fn netbom(subnets: usize) -> wit::Request {
    let spec = json!({
        "prefix": "bench",
        "region": "eu-west-1",
        "cidr": "10.0.0.0/8",
        "enabled": true,
        "subnets": (0..subnets)
            .map(|i| json!({"name": format!("s{i}"), "cidr": format!("10.{}.{}.0/24", i / 256, i % 256)}))
            .collect::<Vec<_>>(),
    });
    let mut req = common::request(&spec.to_string());
    req.stage = wit::Stage::Compose;
    req.kind = "netbom".into();
    req.target.kind = "netbom".into();
    req
}

/// Median and mean of `samples` (sorted in place).
fn summary(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    (samples[samples.len() / 2], mean)
}

fn main() {
    let calls: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300);
    let path = guest_path();
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the Python guest at {} ({e}); build it with wasm-host/guests/build-python.sh",
            path.display()
        )
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let config = HostConfig {
        cache_dir: Some(dir.path().to_path_buf()),
        ..HostConfig::default()
    };
    println!("component: {} ({} bytes)", path.display(), bytes.len());

    let host = WasmHost::new(config.clone()).expect("host");
    let t = Instant::now();
    let component = host.load(&bytes).expect("load");
    println!("load (compile + write the disk cache): {:?}", t.elapsed());
    let cached = std::fs::metadata(host.cache_path(&bytes).expect("cache path"))
        .map(|m| m.len())
        .unwrap_or(0);
    println!("disk cache entry: {cached} bytes");

    // A restart: a new host on the same directory deserializes instead of compiling. Each
    // round is a new host so the memory cache never answers.
    let mut disk = Vec::new();
    for _ in 0..5 {
        let h = WasmHost::new(config.clone()).expect("host");
        let t = Instant::now();
        let _c = h.load(&bytes).expect("load from disk");
        disk.push(t.elapsed());
        assert_eq!(h.cache_stats().disk_hits, 1, "expected a disk hit");
    }
    let (median, mean) = summary(&mut disk);
    println!("load (disk cache hit, 5 new hosts): median {median:?}, mean {mean:?}");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let limits = Limits::default();
    rt.block_on(async {
        for subnets in [3usize, 124] {
            let req = netbom(subnets);
            for _ in 0..20 {
                component.reconcile(&req, &limits).await.expect("reconcile");
            }
            let mut samples = Vec::with_capacity(calls);
            let mut fuel = 0;
            for _ in 0..calls {
                let t = Instant::now();
                let (result, report) = component.reconcile_with_report(&req, &limits).await;
                samples.push(t.elapsed());
                let outcome = result.expect("reconcile");
                assert_eq!(outcome.children.len(), subnets + 1);
                fuel = report.fuel_consumed;
            }
            let (median, mean) = summary(&mut samples);
            println!(
                "reconcile netbom ({subnets} subnets, {} children, {subnets} edges): \
                 median {median:?}, mean {mean:?} per call over {calls} calls \
                 ({fuel} fuel, pooling={})",
                subnets + 1,
                host.is_pooling()
            );
        }
        // The smallest memory cap (in MiB) the 3-subnet call runs under: CPython starts from
        // a pre-initialised snapshot, so the floor is about that snapshot's size.
        let req = netbom(3);
        let mut floor = None;
        for mib in 1..=64u64 {
            let capped = Limits {
                memory_bytes: mib * 1024 * 1024,
                ..limits
            };
            if component.reconcile(&req, &capped).await.is_ok() {
                floor = Some(mib);
                break;
            }
        }
        println!("smallest memory cap that runs netbom (3 subnets): {floor:?} MiB");

        let mut samples = Vec::with_capacity(calls);
        for _ in 0..calls {
            let t = Instant::now();
            component.describe().await.expect("describe");
            samples.push(t.elapsed());
        }
        let (median, mean) = summary(&mut samples);
        println!("describe: median {median:?}, mean {mean:?} per call");
    });
}
