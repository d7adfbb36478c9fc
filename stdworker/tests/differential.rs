//! Differential test of the three composer engines the stdworker serves: the same
//! composition, `netbom` (a network bill of materials turned into one VPC and its subnets),
//! written once per engine, must give the same outcome for every spec.
//!
//! - Starlark: `tests/fixtures/netbom/compose.star` (+ `lib/net.star`), run by
//!   `converge_starlark::Bundle`;
//! - CEL: the kro-style graph `tests/fixtures/netbom-cel.json`, run by `converge_cel::Graph`;
//! - WASM: the Rust guest `wasm-host/guests/rust/src/netbom.rs`, built into
//!   `wasm-host/tests/fixtures/conformance-guest.wasm` (kind `netbom`), run by
//!   `converge_wasm_host`. A missing fixture fails every test here, loudly: the WASM leg is
//!   never skipped.
//!
//! What is proven, over generated specs (proptest) and a few fixed ones:
//! - the **canonical outcome** (children sorted by kind and name with kind, version, name,
//!   spec and labels; edges sorted, each with its sorted value flows; configs sorted) is the
//!   same for all three engines;
//! - it is also exactly the outcome the netbom contract describes ([`expected`]), so three
//!   engines that agree on a wrong answer (say, all empty) still fail;
//! - a disabled spec is an empty *successful* compose in every engine, and a 124-subnet
//!   spec gives 125 children in every engine.
//!
//! Status is not compared: the CEL graph has none, the others report a subnet count.
//! Order is not compared either: it carries no meaning for the control plane.
//!
//! The engines are called directly (not through the stdworker's providers) so a divergence
//! points at an engine or a fixture, not at the provider plumbing. Each engine is loaded
//! once per test binary ([`engines`]); compiling the component is the expensive part.
//!
//! `bench_compose_125_children` (ignored) times one compose per engine; run it in release:
//! `cargo test --release --test differential -- --ignored --nocapture bench`.

use std::{
    collections::BTreeMap,
    fmt::Debug,
    path::{Path, PathBuf},
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

mod common;

use converge_cel::Graph;
use converge_starlark::Bundle;
use converge_stdworker::providers::shared::into_outcome;
use converge_wasm_host::{HostConfig, LoadedComponent, WasmHost, wit};
use proptest::{prelude::*, test_runner::Config as ProptestConfig};
use serde_json::{Value, json};

/// The root's name. No netbom leg uses it (names come from `spec.prefix`), so it is fixed.
const ROOT: &str = "root";

/// The WASM guest, relative to this crate. Read at run time, not with `include_bytes!`,
/// so its absence is a clear test failure rather than a compile error of the whole file.
const WASM_FIXTURE: &str = "../wasm-host/tests/fixtures/conformance-guest.wasm";

// ---------------------------------------------------------------------------------------
// Input

/// A netbom spec, as generated; [`Bill::spec`] is what every engine receives.
#[derive(Debug, Clone)]
struct Bill {
    prefix: String,
    region: String,
    cidr: String,
    enabled: bool,
    /// `(name, cidr)`, names unique (the engines reject duplicate child names, and that
    /// error path is not what this test compares).
    subnets: Vec<(String, String)>,
}

impl Bill {
    fn spec(&self) -> Value {
        json!({
            "prefix": self.prefix,
            "region": self.region,
            "cidr": self.cidr,
            "enabled": self.enabled,
            "subnets": self
                .subnets
                .iter()
                .map(|(name, cidr)| json!({"name": name, "cidr": cidr}))
                .collect::<Vec<_>>(),
        })
    }

    /// Children the contract promises: the VPC and one per subnet, or none when disabled.
    fn child_count(&self) -> usize {
        if self.enabled {
            1 + self.subnets.len()
        } else {
            0
        }
    }
}

/// An enabled bill with `n` subnets named `s0`, `s1`, ...
fn bill_with_subnets(n: usize) -> Bill {
    Bill {
        prefix: "net".into(),
        region: "eu-west-1".into(),
        cidr: "10.0.0.0/16".into(),
        enabled: true,
        subnets: (0..n)
            .map(|i| (format!("s{i}"), format!("10.0.{i}.0/24")))
            .collect(),
    }
}

/// CIDR-looking strings mostly; sometimes arbitrary text (quotes, backslashes, `${`,
/// non-ASCII), which no engine may interpret or re-escape differently: the values are
/// copied into child specs verbatim.
fn cidr(octets: usize) -> BoxedStrategy<String> {
    let plain = prop::collection::vec(any::<u8>(), octets).prop_map(move |o| {
        let mut parts: Vec<String> = o.iter().map(u8::to_string).collect();
        parts.resize(4, "0".into());
        format!("{}/{}", parts.join("."), octets * 8)
    });
    prop_oneof![
        4 => plain,
        1 => "\\PC{0,16}",
        1 => Just("$${spec.cidr} \"q\" \\ ${x}".to_string()),
    ]
    .boxed()
}

fn bills() -> impl Strategy<Value = Bill> {
    let subnets = prop::collection::vec(("[a-z][a-z0-9]{0,6}", cidr(3)), 0..=40).prop_map(
        |mut subnets: Vec<(String, String)>| {
            // Keep the first of each name: child names must be unique.
            let mut seen = std::collections::HashSet::new();
            subnets.retain(|(name, _)| seen.insert(name.clone()));
            subnets
        },
    );
    (
        "[a-z][a-z0-9]{0,8}",
        prop::sample::select(vec!["us-east-1", "eu-west-1", "ap-southeast-2", ""]),
        cidr(2),
        any::<bool>(),
        subnets,
    )
        .prop_map(|(prefix, region, cidr, enabled, subnets)| Bill {
            prefix,
            region: region.to_string(),
            cidr,
            enabled,
            subnets,
        })
}

// ---------------------------------------------------------------------------------------
// The canonical outcome

/// `(kind, name)`.
type Ref = (String, String);

/// One child, engine-independent.
#[derive(Debug, Clone, PartialEq)]
struct Child {
    kind: String,
    kind_version: i32,
    name: String,
    spec: Value,
    /// Sorted (the SDK's outcome already holds them as a map).
    labels: Vec<(String, String)>,
}

/// One dependency edge: `from` waits for `to`; `values` are sorted
/// `(dependent_field, source_field)` pairs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: Ref,
    to: Ref,
    values: Vec<(String, String)>,
}

/// One provider config.
#[derive(Debug, Clone, PartialEq)]
struct Config {
    name: String,
    kind: String,
    kind_version: i32,
    is_default: bool,
    spec: Value,
}

/// What a compose produced, order removed and status left out (see the file's doc).
#[derive(Debug, Clone, PartialEq, Default)]
struct Canon {
    children: Vec<Child>,
    edges: Vec<Edge>,
    configs: Vec<Config>,
}

impl Canon {
    /// Sorts every list. The sort keys are total (they end with the spec's text), so two
    /// outcomes holding the same elements sort identically even with duplicates.
    fn new(mut children: Vec<Child>, mut edges: Vec<Edge>, mut configs: Vec<Config>) -> Self {
        for c in &mut children {
            c.labels.sort();
        }
        children.sort_by_cached_key(|c| {
            (
                c.kind.clone(),
                c.name.clone(),
                c.kind_version,
                c.spec.to_string(),
            )
        });
        for e in &mut edges {
            e.values.sort();
        }
        edges.sort();
        configs.sort_by_cached_key(|c| {
            (
                c.name.clone(),
                c.kind.clone(),
                c.kind_version,
                c.is_default,
                c.spec.to_string(),
            )
        });
        Self {
            children,
            edges,
            configs,
        }
    }

    /// What differs between two outcomes, element by element; `None` when equal. A whole
    /// `Debug` dump of 40 subnets hides the one field that differs.
    fn diff(&self, a: &str, other: &Self, b: &str) -> Option<String> {
        let mut out = Vec::new();
        let index = |cs: &[Child]| -> BTreeMap<Ref, Child> {
            cs.iter()
                .map(|c| ((c.kind.clone(), c.name.clone()), c.clone()))
                .collect()
        };
        let (ca, cb) = (index(&self.children), index(&other.children));
        for (k, x) in &ca {
            match cb.get(k) {
                None => out.push(format!("child {k:?} only in {a}: {x:?}")),
                Some(y) if x != y => out.push(format!(
                    "child {k:?} differs:\n    {a}: {x:?}\n    {b}: {y:?}"
                )),
                Some(_) => {}
            }
        }
        for (k, y) in &cb {
            if !ca.contains_key(k) {
                out.push(format!("child {k:?} only in {b}: {y:?}"));
            }
        }
        if ca.len() != self.children.len() || cb.len() != other.children.len() {
            out.push(format!(
                "duplicate children: {a} has {} ({} distinct), {b} has {} ({} distinct)",
                self.children.len(),
                ca.len(),
                other.children.len(),
                cb.len()
            ));
        }
        for e in &self.edges {
            if !other.edges.contains(e) {
                out.push(format!("edge only in {a}: {e:?}"));
            }
        }
        for e in &other.edges {
            if !self.edges.contains(e) {
                out.push(format!("edge only in {b}: {e:?}"));
            }
        }
        if self.edges.len() != other.edges.len() {
            out.push(format!(
                "edge counts differ: {a} {}, {b} {}",
                self.edges.len(),
                other.edges.len()
            ));
        }
        if self.configs != other.configs {
            out.push(format!(
                "configs differ:\n    {a}: {:?}\n    {b}: {:?}",
                self.configs, other.configs
            ));
        }
        if out.is_empty() && self != other {
            // Unreachable if the checks above are complete; never report "equal" wrongly.
            out.push(format!("{a}: {self:?}\n{b}: {other:?}"));
        }
        // Enough to see the pattern; 125 lines of one systematic mistake hide nothing more.
        const SHOWN: usize = 12;
        if out.len() > SHOWN {
            let more = out.len() - SHOWN;
            out.truncate(SHOWN);
            out.push(format!("... and {more} more differences"));
        }
        (!out.is_empty()).then(|| out.join("\n  "))
    }
}

/// The outcome the netbom contract prescribes for `bill`: an oracle independent of all
/// three engines.
fn expected(bill: &Bill) -> Canon {
    if !bill.enabled {
        return Canon::default();
    }
    let vpc: Ref = ("vpc".into(), format!("{}-vpc", bill.prefix));
    let mut children = vec![Child {
        kind: vpc.0.clone(),
        kind_version: 1,
        name: vpc.1.clone(),
        spec: json!({"cidr": bill.cidr, "region": bill.region}),
        labels: vec![],
    }];
    let mut edges = Vec::new();
    for (name, cidr) in &bill.subnets {
        let name = format!("{}-{name}", bill.prefix);
        children.push(Child {
            kind: "subnet".into(),
            kind_version: 1,
            name: name.clone(),
            spec: json!({"cidr": cidr, "region": bill.region, "vpc_id": null}),
            labels: vec![],
        });
        edges.push(Edge {
            from: ("subnet".into(), name),
            to: vpc.clone(),
            values: vec![("/vpc_id".into(), "/vpc_id".into())],
        });
    }
    Canon::new(children, edges, vec![])
}

// ---------------------------------------------------------------------------------------
// Engines

/// The three engines, each loaded once.
struct Engines {
    starlark: Bundle,
    cel: Graph,
    wasm: Arc<LoadedComponent>,
    /// Drives the async WASM calls; built once rather than per call.
    rt: tokio::runtime::Runtime,
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(&common::manifest_dir()).join(rel)
}

/// The engines, loaded on first use. A test thread that arrives while another loads waits
/// for it. A missing or broken fixture panics here, failing every test with its message.
fn engines() -> &'static Engines {
    static ENGINES: OnceLock<Engines> = OnceLock::new();
    ENGINES.get_or_init(|| {
        let starlark = Bundle::from_zip(
            &converge_starlark::pack(&[
                (
                    "compose.star",
                    include_str!("fixtures/netbom/compose.star"),
                ),
                (
                    "lib/net.star",
                    include_str!("fixtures/netbom/lib/net.star"),
                ),
            ]),
            &converge_starlark::Limits::default(),
        )
        .unwrap_or_else(|e| panic!("the netbom starlark bundle does not load: {e}"));

        let graph: Value = serde_json::from_str(include_str!("fixtures/netbom-cel.json"))
            .expect("fixtures/netbom-cel.json is JSON");
        let cel = Graph::compile(&graph, converge_cel::Limits::default())
            .unwrap_or_else(|e| panic!("the netbom cel graph does not compile: {e:?}"));

        let path = fixture(WASM_FIXTURE);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "the WASM leg needs {} ({e}); build it with wasm-host/guests/build-rust.sh. \
                 This test never skips the WASM leg.",
                path.display()
            )
        });
        let host = WasmHost::new(HostConfig::default()).expect("a wasm host");
        let wasm = host
            .load(&bytes)
            .unwrap_or_else(|e| panic!("{} does not load: {e}", path.display()));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");

        // An older build of the guest without netbom would fail every compose with
        // "unknown kind"; say so up front.
        let info = rt
            .block_on(wasm.describe())
            .unwrap_or_else(|e| panic!("{}: describe failed: {e}", path.display()));
        assert!(
            info.kinds
                .iter()
                .any(|k| k.kind == "netbom" && k.version == 1),
            "{} does not serve netbom@v1 (it serves {:?}); rebuild it with wasm-host/guests/build-rust.sh",
            path.display(),
            info.kinds
                .iter()
                .map(|k| format!("{}@v{}", k.kind, k.version))
                .collect::<Vec<_>>()
        );
        Engines {
            starlark,
            cel,
            wasm,
            rt,
        }
    })
}

/// The compose task the stdworker's wasm provider would send for a netbom root.
fn wasm_request(spec: &Value) -> wit::Request {
    wit::Request {
        reaction: "compose".into(),
        stage: wit::Stage::Compose,
        trigger: "specChange".into(),
        kind: "netbom".into(),
        kind_version: 1,
        target: wit::ResourceRow {
            id: "00000000-0000-0000-0000-000000000001".into(),
            kind: "netbom".into(),
            kind_version: 1,
            name: ROOT.into(),
            owner_id: None,
            root_id: None,
            spec: spec.to_string(),
            status: None,
            generation: 1,
            synced_gen: 0,
            is_ready: false,
            phase: "Reconciling".into(),
            labels: vec![],
            finalizers: vec![],
        },
        status: None,
        generation: 1,
        attempt: 1,
        config: None,
        observed: vec![],
        descendants: vec![],
        operation: None,
        transition: None,
        dedup_token: String::new(),
    }
}

/// Every engine's output is first converted the way its stdworker provider converts it (the
/// starlark and cel output through `providers::shared::into_outcome`, the wasm outcome through
/// `providers::wasm::convert`), so the comparison covers those conversions too.
fn canon(out: converge_sdk::Outcome) -> Canon {
    Canon::new(
        out.children
            .into_iter()
            .map(|c| Child {
                kind: c.kind,
                kind_version: c.kind_version,
                name: c.name,
                spec: c.spec,
                labels: c.labels.into_iter().collect(),
            })
            .collect(),
        out.edges
            .into_iter()
            .map(|e| Edge {
                from: (e.from.kind, e.from.name),
                to: (e.to.kind, e.to.name),
                values: e
                    .values
                    .into_iter()
                    .map(|v| (v.dependent_field, v.source_field))
                    .collect(),
            })
            .collect(),
        out.configs
            .into_iter()
            .map(|c| Config {
                name: c.name,
                kind: c.kind,
                kind_version: c.kind_version,
                is_default: c.is_default,
                spec: c.spec,
            })
            .collect(),
    )
}

fn compose_starlark(e: &Engines, spec: &Value) -> Result<Canon, String> {
    e.starlark
        .compose(spec, &json!({}), &converge_starlark::Limits::default())
        .map(|out| canon(into_outcome(out)))
        .map_err(|err| format!("starlark: {err}"))
}

fn compose_cel(e: &Engines, spec: &Value) -> Result<Canon, String> {
    e.cel
        .compose(ROOT, spec)
        .map(|out| canon(into_outcome(out)))
        .map_err(|err| format!("cel: {err}"))
}

fn compose_wasm(e: &Engines, spec: &Value) -> Result<Canon, String> {
    let out =
        e.rt.block_on(
            e.wasm
                .reconcile(&wasm_request(spec), &converge_wasm_host::Limits::default()),
        )
        .map_err(|err| format!("wasm: {err}"))?;
    converge_stdworker::providers::wasm::convert::outcome(out)
        .map(canon)
        .map_err(|err| format!("wasm: {err}"))
}

/// Runs `bill` through all three engines and checks them against each other, then against
/// the contract. `Err` names what differs; an engine error is a failure too (every
/// generated spec is valid, so all three must succeed).
fn check(bill: &Bill) -> Result<Canon, String> {
    let e = engines();
    let spec = bill.spec();
    let starlark = compose_starlark(e, &spec)?;
    let cel = compose_cel(e, &spec)?;
    let wasm = compose_wasm(e, &spec)?;

    // Counts first: a short message for the likeliest breakage (an engine emitting nothing).
    let want = bill.child_count();
    for (name, got) in [("starlark", &starlark), ("cel", &cel), ("wasm", &wasm)] {
        if got.children.len() != want {
            return Err(format!(
                "{name} produced {} children, the contract says {want}",
                got.children.len()
            ));
        }
    }
    // The differential property proper.
    for (name, other) in [("cel", &cel), ("wasm", &wasm)] {
        if let Some(d) = starlark.diff("starlark", other, name) {
            return Err(format!("starlark and {name} disagree:\n  {d}"));
        }
    }
    // All three agree; now that they agree on the right thing.
    if let Some(d) = starlark.diff("engines", &expected(bill), "contract") {
        return Err(format!(
            "all three engines agree, but not with the contract:\n  {d}"
        ));
    }
    Ok(starlark)
}

fn assert_check(bill: &Bill) -> Canon {
    check(bill).unwrap_or_else(|e| panic!("{e}\nspec: {}", bill.spec()))
}

// ---------------------------------------------------------------------------------------
// Tests

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        // No regression file: it would be written into the source tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every generated spec composes identically in the three engines, and as the contract
    /// says.
    #[test]
    fn engines_agree_on_generated_specs(bill in bills()) {
        if let Err(e) = check(&bill) {
            prop_assert!(false, "{}\nspec: {}", e, bill.spec());
        }
    }
}

/// 124 subnets: 125 children and 124 edges from each engine, all equal.
#[test]
fn large_bill_gives_125_children_everywhere() {
    let out = assert_check(&bill_with_subnets(124));
    assert_eq!(out.children.len(), 125);
    assert_eq!(out.edges.len(), 124);
}

/// A disabled bill is an empty *successful* compose (which prunes every child) in every
/// engine, even with subnets listed: not an error, and nothing left over.
#[test]
fn disabled_bill_is_empty_everywhere() {
    let bill = Bill {
        enabled: false,
        ..bill_with_subnets(3)
    };
    let e = engines();
    let spec = bill.spec();
    for (name, out) in [
        ("starlark", compose_starlark(e, &spec)),
        ("cel", compose_cel(e, &spec)),
        ("wasm", compose_wasm(e, &spec)),
    ] {
        let out = out.unwrap_or_else(|err| panic!("a disabled bill must compose: {err}"));
        assert_eq!(
            out,
            Canon::default(),
            "{name}: a disabled bill composes nothing"
        );
    }
    assert_check(&bill);
}

/// Edge shapes the generator rarely hits: no subnets (the VPC alone, no edges); a subnet
/// named `vpc`, whose child `<prefix>-vpc` shares the VPC's name under another kind (so its
/// edge is not a self-edge); an empty region.
#[test]
fn corner_bills_agree() {
    assert_eq!(assert_check(&bill_with_subnets(0)).children.len(), 1);

    let named_vpc = Bill {
        subnets: vec![
            ("vpc".into(), "10.0.1.0/24".into()),
            ("a".into(), "10.0.2.0/24".into()),
        ],
        ..bill_with_subnets(0)
    };
    let out = assert_check(&named_vpc);
    assert!(
        out.edges
            .iter()
            .any(|e| e.from == ("subnet".into(), "net-vpc".into())
                && e.to == ("vpc".into(), "net-vpc".into())),
        "{out:?}"
    );

    let no_region = Bill {
        region: String::new(),
        ..bill_with_subnets(2)
    };
    assert_check(&no_region);
}

/// The canonical form must not hide what it is meant to compare: an extra edge, a changed
/// spec or a missing child each make two outcomes differ, and `diff` names them.
#[test]
fn canonical_form_detects_differences() {
    let base = expected(&bill_with_subnets(3));
    assert!(base.diff("a", &base.clone(), "b").is_none());

    let mut spec_changed = base.clone();
    spec_changed.children[0].spec["cidr"] = json!("10.9.9.0/24");
    assert!(base.diff("a", &spec_changed, "b").is_some());

    let mut extra_edge = base.clone();
    extra_edge.edges.push(extra_edge.edges[0].clone());
    assert!(base.diff("a", &extra_edge, "b").is_some());

    let mut missing = base.clone();
    missing.children.pop();
    assert!(base.diff("a", &missing, "b").is_some());

    let mut flow = base.clone();
    flow.edges[0].values.clear();
    assert!(base.diff("a", &flow, "b").is_some());
}

// ---------------------------------------------------------------------------------------
// Timing

/// Mean, median and minimum of `runs` calls of `f`, after a warm-up.
fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, Duration, Duration) {
    for _ in 0..runs / 10 {
        std::hint::black_box(f());
    }
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .collect();
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / runs as u32;
    (mean, samples[runs / 2], samples[0])
}

/// Per-call compose time for the 125-child bill. Each figure is the engine call alone, as
/// the stdworker makes it: Starlark on a fresh heap, CEL rendering the compiled graph, WASM
/// lowering the request into a fresh instance, running the guest and validating the
/// outcome (child specs stay JSON strings; the provider parses them afterwards).
#[test]
#[ignore = "timing: cargo test --release --test differential -- --ignored --nocapture bench"]
fn bench_compose_125_children() {
    const RUNS: usize = 500;
    let e = engines();
    let spec = bill_with_subnets(124).spec();
    // Time only what agrees: a fast wrong answer is not a figure.
    assert_check(&bill_with_subnets(124));

    let starlark_limits = converge_starlark::Limits::default();
    let config = json!({});
    let starlark = time(RUNS, || {
        e.starlark
            .compose(&spec, &config, &starlark_limits)
            .expect("starlark")
    });
    let cel = time(RUNS, || e.cel.compose(ROOT, &spec).expect("cel"));
    let req = wasm_request(&spec);
    let wasm_limits = converge_wasm_host::Limits::default();
    let wasm = time(RUNS, || {
        e.rt.block_on(e.wasm.reconcile(&req, &wasm_limits))
            .expect("wasm")
    });

    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("netbom, 125 children + 124 edges, {RUNS} composes per engine ({profile}):");
    for (name, (mean, median, min)) in [("starlark", starlark), ("cel", cel), ("wasm", wasm)] {
        println!(
            "  {name:<8} mean {:>8.1} µs   median {:>8.1} µs   min {:>8.1} µs",
            mean.as_secs_f64() * 1e6,
            median.as_secs_f64() * 1e6,
            min.as_secs_f64() * 1e6,
        );
    }
}
