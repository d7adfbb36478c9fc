//! `converge-bench`: the benchmark harness. Starts `converge dev` (a private PostgreSQL plus
//! ROLE=all), serves a no-op leaf kind with W Rust SDK workers over real gRPC, applies N
//! resources over the HTTP API, and prints figures as one JSON object on stdout:
//! reconciles/s, apply→Ready latency percentiles (bulk and single applies on an idle system)
//! and converge's peak RSS. Progress goes to stderr. `--brokers N` runs N ROLE=broker
//! processes beside ROLE=control (scale-out, with the claim statement's cost).

use std::{
    net::TcpListener,
    path::PathBuf,
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

mod bom;
mod cpu;
mod probe;
mod profile;
mod secure;

use anyhow::{Context, bail};
use base64::Engine as _;
use clap::Parser;
use converge_sdk::{
    HandlerError, KindVersion, Outcome, Provider, ReactionRequest, Registry, WorkerConfig,
};
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

#[derive(Parser, Debug)]
#[command(about = "Benchmark converge: N leaf resources reconciled by W Rust SDK workers")]
struct Args {
    /// Resources to apply in the bulk run.
    #[arg(long, default_value_t = 10_000)]
    n: usize,
    /// Worker connections (each a separate gRPC stream).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// max_inflight of each worker.
    #[arg(long, default_value_t = 256)]
    parallel: usize,
    /// Concurrent HTTP applies.
    #[arg(long, default_value_t = 32)]
    apply_concurrency: usize,
    /// Measure the PostgreSQL ceiling (`pg_limit.py`) right before and after the run and add
    /// `probe` and `ratios` (each throughput over the probe's queue rate) to the JSON.
    #[arg(long)]
    probe: bool,
    /// The probe script (default: the shared `bench/pg_limit.py` beside the repository).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/bench/pg_limit.py"))]
    probe_script: std::path::PathBuf,
    /// Apply in batches of this many items (`POST /api/v1/resources:batch`, at most 10,000)
    /// instead of one request per resource; 0 = single applies.
    #[arg(long, default_value_t = 0)]
    batch: usize,
    /// Single applies measured one at a time on the idle system.
    #[arg(long, default_value_t = 200)]
    idle_samples: usize,
    /// Apply everything before the workers connect, so the reconcile rate is measured alone.
    #[arg(long)]
    preload: bool,
    /// Composite mode: total children across all roots (chains of 3 with value flows).
    #[arg(long)]
    bom_children: Option<usize>,
    /// Composite mode: number of roots (rollup latency is measured per root).
    #[arg(long, default_value_t = 20)]
    roots: usize,
    /// Composite mode: bulk runs one after another in the same database, each of `roots` new
    /// roots, with VACUUM ANALYZE between them; rounds after the first measure a database whose
    /// statistics know composites (as a long-lived one's do), not an empty one.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Composite mode: small roots (30 children) applied one at a time after the bulk run,
    /// to measure rollup latency on an otherwise idle system.
    #[arg(long, default_value_t = 20)]
    idle_roots: usize,
    /// Leaf mode: the kind's global concurrency cap (max_inflight; 0 = uncapped).
    #[arg(long, default_value_t = 0)]
    cap: u32,
    /// Composite mode: afterwards delete every root and measure teardown (nodes/s).
    #[arg(long)]
    delete: bool,
    /// Composite mode: the kinds carry finalizers, so every node's teardown runs on a worker.
    #[arg(long)]
    finalizers: bool,
    /// Leaf mode: run each worker as this shell command instead of in-process Rust workers
    /// (any worker form: it gets BROKER_ADDR, WORKER_MAX_PARALLEL, and BENCH_KIND/NOOP_KIND =
    /// the leaf kind's name, and is killed at the end).
    #[arg(long)]
    worker_cmd: Option<String>,
    /// A default provider config spec (JSON) for the leaf kind, e.g. an exec program.
    #[arg(long)]
    providerconfig: Option<String>,
    /// A file whose bytes ride that default provider config as its bundle (`data`), e.g. a
    /// WASM component for the stdworker's wasm provider.
    #[arg(long, requires = "providerconfig")]
    providerconfig_data: Option<PathBuf>,
    /// Leaf mode: the leaf kind's name (the in-process worker serves any name; an external
    /// worker must serve it, e.g. `conf-leaf` for the conformance guest component).
    #[arg(long, default_value = "benchleaf")]
    kind: String,
    /// Run the broker as a process of its own (ROLE=broker beside ROLE=control): the
    /// baseline for --secure.
    #[arg(long)]
    split: bool,
    /// As --split, with the broker behind TLS and bearer tokens (workers dial https:// with
    /// a worker token) and the API behind an admin token.
    #[arg(long)]
    secure: bool,
    /// Scale-out: run this many ROLE=broker processes beside ROLE=control (implies --split;
    /// dynamic sharding divides the kind's shards between them). Workers are spread over the
    /// brokers round-robin unless --workers-on-one. Adds `brokers` and `claims` (the claim
    /// statement's calls, mean time, rows and buffer hits from pg_stat_statements) to the JSON.
    #[arg(long, default_value_t = 0)]
    brokers: usize,
    /// With --brokers: every worker dials the first broker (the others claim nothing: no
    /// worker of theirs serves the kind).
    #[arg(long, requires = "brokers")]
    workers_on_one: bool,
    /// Leaf mode: after the bulk apply (with --preload: before any worker connects, so every
    /// resource is still queued), time this many sequential `GET /metrics` scrapes and add
    /// `scrape_ms` (p50/p99/max) to the JSON; issue 27 asks under 5 ms at 1M resources.
    #[arg(long, default_value_t = 0)]
    scrape_samples: usize,
    /// With --scrape-samples: stop after the scrapes instead of reconciling everything
    /// (the figure wanted at 1M resources does not need the hour-long reconcile).
    #[arg(long, requires = "scrape_samples")]
    scrape_only: bool,
    /// Profile the reconcile window (leaf: from the workers' start with --preload; BOM: each
    /// round): CPU per process and PostgreSQL time per statement (pg_stat_statements,
    /// nested statements included), each per reconcile, as `profile` in the JSON. Leaf with
    /// --preload: the applies too, per apply, as `apply_profile`.
    #[arg(long)]
    profile: bool,
    /// With --profile: also `perf record -a -g` the window into this file.
    #[arg(long, requires = "profile")]
    perf: Option<PathBuf>,
}

/// The no-op leaf: reports a tiny status.
struct Noop(String);

impl Provider for Noop {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.0.clone(), 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        Ok(Outcome::status(
            json!({"ok": true, "generation": req.generation}),
        ))
    }
}

/// Where converge's log (its stdout) goes: the bench's stderr when BENCH_CONVERGE_LOG asks
/// for it (stdout carries the bench's JSON), else nowhere.
fn converge_log() -> Stdio {
    use std::os::fd::AsFd;
    if std::env::var_os("BENCH_CONVERGE_LOG").is_some()
        && let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned()
    {
        return Stdio::from(fd);
    }
    Stdio::null()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .map(|l| l.local_addr().map(|a| a.port()).unwrap_or(0))
        .unwrap_or(0)
}

fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let p = me.with_file_name(name);
    if !p.exists() {
        bail!(
            "{} not found next to the benchmark (build the workspace binaries first)",
            p.display()
        );
    }
    Ok(p)
}

fn peak_rss_mb(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

struct Server {
    child: Child,
    /// The brokers' own processes with --split / --secure / --brokers.
    broker_children: Vec<Child>,
    http: String,
    /// The WorkerService address of each broker (the ROLE=all process's when not split).
    brokers: Vec<String>,
    db_url: String,
    secure: Option<secure::Secure>,
    /// The dev database and certificates: 0.5 GB after a 20k BOM run, removed on drop so
    /// repeated runs do not fill the disk.
    dir: PathBuf,
}

impl Server {
    /// The converge processes' pids (the one started by `converge dev` and any brokers).
    fn pids(&self) -> Vec<u32> {
        std::iter::once(&self.child)
            .chain(&self.broker_children)
            .filter_map(|c| c.id())
            .collect()
    }

    /// The broker worker `i` dials: round-robin over the brokers, or the first with
    /// --workers-on-one.
    fn broker_for(&self, args: &Args, i: usize) -> &str {
        let at = if args.workers_on_one {
            0
        } else {
            i % self.brokers.len()
        };
        &self.brokers[at]
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A converge process the bench started exited before it was ready. The ports it was given
/// were free when the bench picked them, but only the child binds them, so another process
/// can take one first ("Address already in use"): the start is tried again with new ports.
#[derive(Debug)]
struct EarlyExit(std::process::ExitStatus);

impl std::fmt::Display for EarlyExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "converge exited before it was ready ({})", self.0)
    }
}

impl std::error::Error for EarlyExit {}

/// Starts of a converge process tried before giving up (see [`EarlyExit`]).
const START_ATTEMPTS: usize = 3;

/// Runs `start` until it succeeds, fails otherwise than by [`EarlyExit`], or has been tried
/// [`START_ATTEMPTS`] times.
async fn with_new_ports<T, F, Fut>(what: &str, mut start: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let mut attempt = 1;
    loop {
        match start().await {
            Err(e) if attempt < START_ATTEMPTS && e.downcast_ref::<EarlyExit>().is_some() => {
                eprintln!("{what}: {e}; starting it again on new ports");
                attempt += 1;
            }
            r => return r,
        }
    }
}

/// Starts `converge serve` with ROLE=broker on `server`'s database and waits for its probes,
/// on new ports when it exits before it is ready.
async fn start_broker(server: &mut Server) -> anyhow::Result<()> {
    let (child, url) = with_new_ports("broker", || start_broker_once(server)).await?;
    server.broker_children.push(child);
    server.brokers.push(url);
    Ok(())
}

/// One start of a broker on `server`'s database: its process and gRPC URL once ready.
async fn start_broker_once(server: &Server) -> anyhow::Result<(Child, String)> {
    let (gp, hp) = (free_port(), free_port());
    let mut cmd = Command::new(sibling("converge")?);
    cmd.arg("serve")
        .env("ROLE", "broker")
        .env("DATABASE_URL", &server.db_url)
        .env("BROKER_LISTEN_ADDR", format!("127.0.0.1:{gp}"))
        .env("HEALTH_ADDR", format!("127.0.0.1:{hp}"))
        .env(
            "LOG_LEVEL",
            std::env::var("BENCH_CONVERGE_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(converge_log())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    for (k, v) in server.secure.iter().flat_map(|s| s.broker_env()) {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().context("starting a broker")?;
    let scheme = if server.secure.is_some() {
        "https"
    } else {
        "http"
    };
    let url = format!("{scheme}://127.0.0.1:{gp}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = reqwest::Client::new();
    loop {
        let ready = match &server.secure {
            Some(s) => converge_auth::testing::https(hp, &s.ca_pem, "GET", "/readyz", None, None)
                .await
                .is_ok_and(|r| r.status == 200),
            None => client
                .get(format!("http://127.0.0.1:{hp}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success()),
        };
        if ready {
            return Ok((child, url));
        }
        if let Some(status) = child.try_wait()? {
            return Err(EarlyExit(status).into());
        }
        if Instant::now() > deadline {
            bail!("the broker did not become ready in 60 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts `converge dev` (and the brokers `args` asks for), on new ports when it exits before
/// it is ready.
async fn start_server(args: &Args) -> anyhow::Result<Server> {
    with_new_ports("converge dev", || start_server_once(args)).await
}

async fn start_server_once(args: &Args) -> anyhow::Result<Server> {
    let dir = std::env::temp_dir().join(format!("converge-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let (hp, gp, pp) = (free_port(), free_port(), free_port());
    let secure = if args.secure {
        Some(secure::Secure::new(&dir)?)
    } else {
        None
    };
    let split = args.split || args.secure || args.brokers > 0;
    let mut cmd = Command::new(sibling("converge")?);
    cmd.env("ROLE", if split { "control" } else { "all" });
    for (k, v) in secure.iter().flat_map(|s| s.control_env()) {
        cmd.env(k, v);
    }
    let child = cmd
        .arg("dev")
        .env("CONVERGE_DEV_DIR", &dir)
        .env("CONVERGE_DEV_PG_PORT", pp.to_string())
        .env("DEVDB_FAST", "1")
        // Commit timestamps date each row's last write by when it became visible, which is
        // what the rollup latency measures (see bom_run).
        .env(
            "CONVERGE_DEV_PG_SETTINGS",
            format!(
                "track_commit_timestamp=on {}{}",
                // --brokers reports the claim statement's cost from pg_stat_statements;
                // --profile every statement's.
                if args.profile {
                    profile::PG_SETTINGS
                } else if args.brokers > 0 {
                    "shared_preload_libraries=pg_stat_statements "
                } else {
                    ""
                },
                std::env::var("CONVERGE_DEV_PG_SETTINGS").unwrap_or_default()
            ),
        )
        .env("LISTEN_ADDR", format!("127.0.0.1:{hp}"))
        .env("BROKER_LISTEN_ADDR", format!("127.0.0.1:{gp}"))
        .env(
            "LOG_LEVEL",
            std::env::var("BENCH_CONVERGE_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(converge_log())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("starting converge dev")?;
    let mut s = Server {
        child,
        broker_children: Vec::new(),
        http: format!("http://127.0.0.1:{hp}"),
        brokers: if split {
            Vec::new()
        } else {
            vec![format!("http://127.0.0.1:{gp}")]
        },
        db_url: format!("postgres://converge@127.0.0.1:{pp}/converge"),
        secure,
        dir,
    };
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(r) = client.get(format!("{}/readyz", s.http)).send().await
            && r.status().is_success()
        {
            for _ in 0..args.brokers.max(usize::from(split)) {
                start_broker(&mut s).await?;
            }
            return Ok(s);
        }
        if let Some(status) = s.child.try_wait()? {
            return Err(EarlyExit(status).into());
        }
        if Instant::now() > deadline {
            bail!("converge dev did not become ready in 120 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Worker processes of another form: each runs `cmd` under `sh -c` until `stop`.
fn start_external_workers(
    args: &Args,
    cmd: &str,
    server: &Server,
    stop: &CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let secure_env: Vec<_> = server.secure.iter().flat_map(|s| s.worker_env()).collect();
    (0..args.workers)
        .map(|i| {
            // `exec`, so the kill at the end reaches the worker, not just the shell.
            let child = Command::new("sh")
                .arg("-c")
                .arg(format!("exec {cmd}"))
                .env("BROKER_ADDR", server.broker_for(args, i))
                .env("WORKER_MAX_PARALLEL", args.parallel.to_string())
                .env("WORKER_NAME", format!("bench-{i}"))
                .env("BENCH_KIND", &args.kind)
                .env("NOOP_KIND", &args.kind)
                .env("STDWORKER_EXEC_KINDS", &args.kind)
                .env("LOG_LEVEL", "warn")
                .envs(secure_env.iter().map(|(k, v)| (*k, v.as_str())))
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn();
            let stop = stop.clone();
            tokio::spawn(async move {
                match child {
                    Ok(mut c) => {
                        stop.cancelled().await;
                        let _ = c.kill().await;
                    }
                    Err(e) => eprintln!("worker {i} did not start: {e}"),
                }
            })
        })
        .collect()
}

fn start_workers(
    args: &Args,
    server: &Server,
    stop: &CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    if let Some(cmd) = &args.worker_cmd
        && args.bom_children.is_none()
    {
        return start_external_workers(args, cmd, server, stop);
    }
    let composite = args.bom_children.is_some();
    (0..args.workers)
        .map(|i| {
            let mut cfg = WorkerConfig::new(server.broker_for(args, i));
            cfg.max_parallel = args.parallel;
            cfg.worker_name = format!("bench-{i}");
            cfg.drain_timeout = Duration::from_secs(2);
            if let Some(s) = &server.secure {
                s.worker(&mut cfg);
            }
            let stop = stop.clone();
            let registry = if composite {
                Registry::new().with(bom::BenchBom).with(bom::BenchLink)
            } else {
                Registry::new().with(Noop(args.kind.clone()))
            };
            tokio::spawn(async move {
                if let Err(e) =
                    converge_sdk::run_worker(cfg, registry, stop.cancelled_owned()).await
                {
                    eprintln!("worker {i} failed: {e}");
                }
            })
        })
        .collect()
}

async fn apply_bulk(
    client: &reqwest::Client,
    http: &str,
    kind: &str,
    n: usize,
    conc: usize,
    batch: usize,
) -> anyhow::Result<Duration> {
    let step = batch.max(1);
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conc {
        let (client, next, kind) = (client.clone(), next.clone(), kind.to_owned());
        let url = if batch > 0 {
            format!("{http}/api/v1/resources:batch")
        } else {
            format!("{http}/api/v1/resources")
        };
        tasks.push(tokio::spawn(async move {
            loop {
                let from = next.fetch_add(step, Ordering::Relaxed);
                if from >= n {
                    return Ok::<_, anyhow::Error>(());
                }
                let item = |i: usize| json!({"kind": kind.as_str(), "kind_version": 1, "name": format!("bulk-{i}"), "spec": {"i": i}});
                let body = if batch > 0 {
                    serde_json::Value::Array((from..(from + step).min(n)).map(item).collect())
                } else {
                    item(from)
                };
                let r = send_retrying(&client, &url, &body).await?;
                if !r.status().is_success() {
                    bail!("apply failed: {} {}", r.status(), r.text().await.unwrap_or_default());
                }
                if batch > 0 {
                    let v: serde_json::Value = r.json().await?;
                    if v["failed"].as_u64() != Some(0) {
                        bail!("batch apply refused items: {}", v["results"]);
                    }
                }
                let done = (from + step).min(n);
                if done / 10_000 != from / 10_000 {
                    eprintln!("  applied {done}/{n}");
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(t0.elapsed())
}

/// POSTs `body`, retrying a request that failed in transport (a 1M-resource run met
/// "connection closed before message completed" once every few hundred thousand items).
/// Safe because an apply is idempotent: a repeated item is answered `unchanged`.
async fn send_retrying(
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
) -> anyhow::Result<reqwest::Response> {
    const ATTEMPTS: u32 = 3;
    let mut attempt = 1;
    loop {
        match client.post(url).json(body).send().await {
            Ok(r) => return Ok(r),
            Err(e) if attempt < ATTEMPTS => {
                eprintln!("  apply request failed ({e}); retrying ({attempt}/{ATTEMPTS})");
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                attempt += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

async fn wait_all_ready(
    pool: &sqlx::PgPool,
    kind: &str,
    prefix: &str,
    n: usize,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(1800);
    let mut last_count = Instant::now();
    loop {
        // While any row is behind its spec (a resource_lag row), keep waiting: one probe of
        // the narrow lag table. Counting the Ready rows instead scanned all n resources on
        // every poll, 125 ms of a backend at 100k three times a second: about a tenth of this
        // 2-core machine spent by the benchmark itself inside the window it measures.
        let behind: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM resource_lag)")
            .fetch_one(pool)
            .await?;
        // Counted at most once a second even when nothing is behind: rows synced but not
        // Ready (degraded, failed) would otherwise be counted on every poll.
        let since = last_count.elapsed();
        if (!behind && since >= Duration::from_secs(1)) || since >= Duration::from_secs(5) {
            last_count = Instant::now();
            let ready: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM resources WHERE kind = $2 AND name LIKE $1 AND phase = 'Ready'",
            )
            .bind(format!("{prefix}%"))
            .bind(kind)
            .fetch_one(pool)
            .await?;
            let ready = ready as usize;
            if ready >= n {
                return Ok(());
            }
            eprintln!("  ready {ready}/{n}");
            if Instant::now() > deadline {
                bail!("only {ready}/{n} resources became Ready in 30 minutes");
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn idle_latency(
    client: &reqwest::Client,
    http: &str,
    kind: &str,
    samples: usize,
) -> anyhow::Result<Vec<f64>> {
    let mut out = Vec::with_capacity(samples);
    // Sample 0 is a warm-up, not counted: it waits for the workers started just before to
    // connect and subscribe, which is start-up time, not an apply's latency.
    for i in 0..=samples {
        let name = format!("idle-{i}");
        let t0 = Instant::now();
        let r = client
            .post(format!("{http}/api/v1/resources"))
            .json(&json!({"kind": kind, "kind_version": 1, "name": name, "spec": {}}))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("apply failed: {}", r.status());
        }
        loop {
            let v: Value = client
                .get(format!("{http}/api/v1/resources/{kind}/{name}"))
                .send()
                .await?
                .json()
                .await?;
            if v["phase"] == "Ready" {
                break;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                bail!("{name} not Ready after 30 s: {v}");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        if i > 0 {
            out.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
    }
    out.sort_by(f64::total_cmp);
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let probe_before = if args.probe {
        Some(probe::measure(&args.probe_script)?)
    } else {
        None
    };
    eprintln!("starting converge dev ...");
    let mut server = start_server(&args).await?;
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(s) = &server.secure {
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {}", s.admin_token).parse()?,
        );
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.apply_concurrency)
        .default_headers(headers)
        .build()?;
    let manifest = json!({
        "kind": args.kind, "kind_version": 1, "description": "benchmark no-op leaf",
        "spec_schema": {"type": "object"},
        "max_inflight": args.cap,
        "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]
    });
    let r = client
        .put(format!(
            "{}/api/v1/kinds/{}/manifest",
            server.http, args.kind
        ))
        .json(&manifest)
        .send()
        .await?;
    if !r.status().is_success() {
        bail!("manifest apply failed: {}", r.status());
    }
    if let Some(spec) = &args.providerconfig {
        let spec: Value = serde_json::from_str(spec).context("--providerconfig is not JSON")?;
        let mut body = json!({"name": format!("{}-default", args.kind), "kind": args.kind,
                              "kind_version": 1, "is_default": true, "spec": spec});
        if let Some(path) = &args.providerconfig_data {
            let bytes = std::fs::read(path)
                .with_context(|| format!("--providerconfig-data {}", path.display()))?;
            body["data"] = Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
        }
        let r = client
            .post(format!("{}/api/v1/providerconfigs", server.http))
            .json(&body)
            .send()
            .await?;
        if !r.status().is_success() {
            bail!(
                "provider config refused: {} {}",
                r.status(),
                r.text().await.unwrap_or_default()
            );
        }
    }
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&server.db_url)
        .await?;
    let stop = CancellationToken::new();
    if let Some(children) = args.bom_children {
        let out = run_bom(&args, &server, &client, &pool, children, &stop).await?;
        stop.cancel();
        stop_server(&mut server).await;
        return report(out, probe_before.as_ref(), &args);
    }

    let mut workers = Vec::new();
    if !args.preload {
        workers = start_workers(&args, &server, &stop);
    }
    eprintln!(
        "measuring {} single applies on the idle system ...",
        args.idle_samples
    );
    if args.preload {
        workers = start_workers(&args, &server, &stop);
    }
    let idle = idle_latency(&client, &server.http, &args.kind, args.idle_samples).await?;
    if args.preload {
        stop.cancel();
        for w in workers.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(5), w).await;
        }
    }
    let stop = CancellationToken::new();
    if args.brokers > 0 {
        claim_stats_reset(&pool).await?;
    }

    eprintln!(
        "applying {} resources with {} concurrent clients ...",
        args.n, args.apply_concurrency
    );
    // With --preload nothing reconciles during the applies, so the window is theirs alone.
    let apply_window = if args.profile && args.preload {
        Some(profile::start(&pool, server.pids(), None).await?)
    } else {
        None
    };
    let apply_time = apply_bulk(
        &client,
        &server.http,
        &args.kind,
        args.n,
        args.apply_concurrency,
        args.batch,
    )
    .await?;
    let apply_profile = match apply_window {
        Some(w) => Some(profile::finish(w, &pool, args.n as f64).await?),
        None => None,
    };
    let scrape = if args.scrape_samples > 0 {
        eprintln!("timing {} /metrics scrapes ...", args.scrape_samples);
        let pid = server.child.id().unwrap_or(0);
        let cpu0 = cpu::process_cpu_secs(pid);
        let ms = scrape_latency(&client, &server.http, args.scrape_samples).await?;
        // converge's own CPU per scrape: what a scrape costs, whatever else the machine runs
        // (the latency percentiles include waiting for a core).
        let cpu_ms = cpu0
            .zip(cpu::process_cpu_secs(pid))
            .map(|(a, b)| (b - a) * 1000.0 / ms.len().max(1) as f64);
        Some((ms, cpu_ms))
    } else {
        None
    };
    let scrape_json = |(ms, cpu_ms): &(Vec<f64>, Option<f64>)| {
        json!({"n": ms.len(), "p50": percentile(ms, 50.0), "p99": percentile(ms, 99.0),
               "max": ms.last().copied().unwrap_or(0.0), "converge_cpu_ms_per_scrape": cpu_ms})
    };
    if args.scrape_only {
        let out = json!({
            "n": args.n,
            "apply_secs": apply_time.as_secs_f64(),
            "scrape_ms": scrape.as_ref().map(scrape_json),
        });
        stop_server(&mut server).await;
        return report(out, probe_before.as_ref(), &args);
    }
    let window = if args.profile {
        Some(profile::start(&pool, server.pids(), args.perf.as_deref()).await?)
    } else {
        None
    };
    let workers_at = chrono::Utc::now();
    if args.preload {
        eprintln!("starting {} workers ...", args.workers);
        workers = start_workers(&args, &server, &stop);
    }
    wait_all_ready(&pool, &args.kind, "bulk-", args.n).await?;
    let profiled = match window {
        Some(w) => Some(profile::finish(w, &pool, args.n as f64).await?),
        None => None,
    };
    let row: (f64, f64, f64, f64) = sqlx::query_as(
        "SELECT extract(epoch FROM max(updated_at) - min(created_at))::float8,
                extract(epoch FROM max(updated_at) - $1)::float8,
                (percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM updated_at - created_at)))::float8,
                (percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM updated_at - created_at)))::float8
         FROM resources WHERE kind = $2 AND name LIKE 'bulk-%'",
    )
    .bind(workers_at)
    .bind(&args.kind)
    .fetch_one(&pool)
    .await?;
    let (span, since_workers, p50, p99) = row;
    let rss = server.child.id().and_then(peak_rss_mb);
    let reconcile_window = if args.preload { since_workers } else { span };
    let out = json!({
        "n": args.n,
        "workers": args.workers,
        "worker_parallel": args.parallel,
        "mode": if args.preload { "preload" } else { "concurrent" },
        "cap": args.cap,
        "worker": args.worker_cmd.as_deref().unwrap_or("in-process rust"),
        "apply_secs": apply_time.as_secs_f64(),
        "applies_per_sec": args.n as f64 / apply_time.as_secs_f64(),
        "apply_batch": args.batch,
        "reconcile_secs": reconcile_window,
        "reconciles_per_sec": args.n as f64 / reconcile_window.max(1e-9),
        "bulk_apply_to_ready_ms": {"p50": p50 * 1000.0, "p99": p99 * 1000.0},
        "idle_single_apply_to_ready_ms": {"n": idle.len(), "p50": percentile(&idle, 50.0), "p99": percentile(&idle, 99.0), "max": idle.last().copied().unwrap_or(0.0)},
        "converge_peak_rss_mb": rss,
    });
    let mut out = out;
    if let Some(sc) = &scrape {
        out["scrape_ms"] = scrape_json(sc);
    }
    if let Some(p) = profiled {
        out["profile"] = p;
    }
    if let Some(p) = apply_profile {
        out["apply_profile"] = p;
    }
    if args.brokers > 0 {
        out["brokers"] = json!(args.brokers);
        out["workers_on_one"] = json!(args.workers_on_one);
        out["claims"] = claim_stats(&pool).await?;
    }
    stop.cancel();
    for w in workers {
        let _ = tokio::time::timeout(Duration::from_secs(5), w).await;
    }
    stop_server(&mut server).await;
    report(out, probe_before.as_ref(), &args)
}

/// Starts counting the claim statements afresh (pg_stat_statements, loaded by --brokers).
async fn claim_stats_reset(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(pool)
        .await
        .context("pg_stat_statements (install the PostgreSQL contrib modules)")?;
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(pool)
        .await?;
    Ok(())
}

/// The claim statement's cost since [`claim_stats_reset`], over every broker: calls, mean
/// execution time, rows per call and shared buffers touched per call.
async fn claim_stats(pool: &sqlx::PgPool) -> anyhow::Result<Value> {
    let (calls, mean_ms, rows, blocks): (i64, f64, f64, f64) = sqlx::query_as(
        "SELECT coalesce(sum(calls), 0)::int8,
                coalesce(sum(total_exec_time) / nullif(sum(calls), 0), 0)::float8,
                coalesce(sum(rows)::float8 / nullif(sum(calls), 0), 0)::float8,
                coalesce(sum(shared_blks_hit + shared_blks_read)::float8
                         / nullif(sum(calls), 0), 0)::float8
         FROM pg_stat_statements WHERE query LIKE '%work_claim(%'",
    )
    .fetch_one(pool)
    .await?;
    Ok(
        json!({"calls": calls, "mean_ms": mean_ms, "rows_per_call": rows,
              "blocks_per_call": blocks}),
    )
}

/// Times `n` sequential scrapes of `/metrics` (the whole body read), sorted ascending in ms.
async fn scrape_latency(
    client: &reqwest::Client,
    http: &str,
    n: usize,
) -> anyhow::Result<Vec<f64>> {
    let mut ms = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = client.get(format!("{http}/metrics")).send().await?;
        if !r.status().is_success() {
            bail!("/metrics answered {}", r.status());
        }
        r.bytes().await?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms)
}

/// Sends SIGTERM to converge and waits up to 20 s for it to exit.
async fn stop_server(server: &mut Server) {
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(server.child.id().unwrap_or(0).to_string())
        .status();
    let _ = tokio::time::timeout(Duration::from_secs(20), server.child.wait()).await;
}

/// Prints the benchmark's JSON line; with `--probe`, after the second probe (run once
/// converge has stopped) and with the ratios.
fn report(mut out: Value, probe_before: Option<&Value>, args: &Args) -> anyhow::Result<()> {
    if let Some(before) = probe_before {
        let after = probe::measure(&args.probe_script)?;
        probe::attach(&mut out, before, &after);
    }
    println!("{out}");
    Ok(())
}

/// The composite benchmark (see `bom.rs`).
async fn run_bom(
    args: &Args,
    server: &Server,
    client: &reqwest::Client,
    pool: &sqlx::PgPool,
    children: usize,
    stop: &CancellationToken,
) -> anyhow::Result<Value> {
    for m in bom::manifests(args.finalizers) {
        let kind = m["kind"].as_str().unwrap_or_default().to_string();
        let r = client
            .put(format!("{}/api/v1/kinds/{kind}/manifest", server.http))
            .json(&m)
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("manifest {kind} refused: {}", r.status());
        }
    }
    let workers = start_workers(args, server, stop);
    let chains = (children / 3 / args.roots).max(1);
    let mut rounds = Vec::new();
    for round in 0..args.rounds.max(1) {
        if round > 0 {
            // The state a long-lived database is in: statistics that know the earlier rounds'
            // composites (plans chosen from them), dead rows vacuumed.
            eprintln!("VACUUM ANALYZE before round {} ...", round + 1);
            sqlx::raw_sql("VACUUM ANALYZE").execute(pool).await?;
        }
        rounds.push(bom_round(args, server, client, pool, chains, round).await?);
    }
    eprintln!(
        "measuring rollup latency of {} small roots applied one at a time ...",
        args.idle_roots
    );
    for r in 0..args.idle_roots {
        let name = format!("idle{r}");
        let body =
            json!({"kind": "benchbom", "kind_version": 1, "name": name, "spec": {"chains": 10}});
        client
            .post(format!("{}/api/v1/resources", server.http))
            .json(&body)
            .send()
            .await?;
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let phase: Option<String> = sqlx::query_scalar(
                "SELECT phase FROM resources WHERE kind = 'benchbom' AND name = $1",
            )
            .bind(&name)
            .fetch_optional(pool)
            .await?;
            if phase.as_deref() == Some("Ready") {
                break;
            }
            if Instant::now() > until {
                bail!("{name} not Ready in 60 s");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let (idle, _) = rollup_latencies(pool, "idle%").await?;
    let teardown = if args.delete {
        Some(delete_all(server, client, pool).await?)
    } else {
        None
    };
    stop.cancel();
    for w in workers {
        let _ = tokio::time::timeout(Duration::from_secs(5), w).await;
    }
    let mut out = json!({
        "mode": "bom",
        "finalizers": args.finalizers,
        "teardown": teardown,
        "roots": args.roots,
        "workers": args.workers,
        "idle_rollup_latency_ms": {"n": idle.len(), "p50": percentile(&idle, 50.0), "p99": percentile(&idle, 99.0)},
        "converge_peak_rss_mb": server.child.id().and_then(peak_rss_mb),
    });
    // The last round's figures at the top (with one round, the only one); every round's when
    // there are several.
    if let (Some(Value::Object(last)), Value::Object(o)) = (rounds.last(), &mut out) {
        o.extend(last.clone());
    }
    if rounds.len() > 1 {
        out["rounds"] = Value::Array(rounds);
    }
    Ok(out)
}

/// One bulk run of the composite benchmark: `args.roots` roots named `bom{round}-{r}`, each
/// composing `chains` chains, applied at once; figures from the rows of this round only.
async fn bom_round(
    args: &Args,
    server: &Server,
    client: &reqwest::Client,
    pool: &sqlx::PgPool,
    chains: usize,
    round: usize,
) -> anyhow::Result<Value> {
    let prefix = format!("bom{round}-");
    let like = format!("{prefix}%");
    let window = if args.profile {
        let perf = args
            .perf
            .as_ref()
            .map(|p| p.with_extension(format!("round{round}.data")));
        Some(profile::start(pool, server.pids(), perf.as_deref()).await?)
    } else {
        None
    };
    let cpu_start = cpu::CpuSample::now();
    eprintln!(
        "applying {} roots x {} chains x 3 = {} children ...",
        args.roots,
        chains,
        args.roots * chains * 3
    );
    for r in 0..args.roots {
        let body = json!({"kind": "benchbom", "kind_version": 1, "name": format!("{prefix}{r}"), "spec": {"chains": chains}});
        let resp = client
            .post(format!("{}/api/v1/resources", server.http))
            .json(&body)
            .send()
            .await?;
        if !resp.status().is_success() {
            bail!("apply failed: {}", resp.status());
        }
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    let mut last_report = Instant::now();
    loop {
        // The roots only (a probe of the kind's rows): polled often, so the CPU window below
        // ends close to the last root's Ready without the poll itself loading the database.
        let ready: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM resources WHERE kind = 'benchbom' AND name LIKE $1 AND phase = 'Ready'",
        )
        .bind(&like)
        .fetch_one(pool)
        .await?;
        if ready as usize >= args.roots {
            break;
        }
        // The children's count scans them all (100 ms at 100k): progress every 5 s only.
        if last_report.elapsed() >= Duration::from_secs(5) {
            last_report = Instant::now();
            let kids: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM resources WHERE kind = 'benchlink' AND name LIKE $1 AND phase = 'Ready'",
            )
            .bind(&like)
            .fetch_one(pool)
            .await?;
            eprintln!(
                "  roots ready {ready}/{}, children ready {kids}",
                args.roots
            );
        }
        if Instant::now() > deadline {
            bail!("roots not Ready after 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cpu_busy = cpu_start
        .zip(cpu::CpuSample::now())
        .map(|(a, b)| b.busy_secs_since(&a));
    let (total, n_children, reconcile_window): (f64, i64, f64) = sqlx::query_as(
        "WITH rs AS (SELECT kind, created_at, updated_at FROM resources WHERE name LIKE $1)
         SELECT extract(epoch FROM (SELECT max(updated_at) FROM rs WHERE kind = 'benchbom')
                                - (SELECT min(created_at) FROM rs WHERE kind = 'benchbom'))::float8,
                (SELECT count(*) FROM rs WHERE kind = 'benchlink'),
                extract(epoch FROM (SELECT max(updated_at) FROM rs WHERE kind = 'benchlink')
                                - (SELECT min(created_at) FROM rs WHERE kind = 'benchbom'))::float8",
    )
    .bind(&like)
    .fetch_one(pool)
    .await?;
    let (lat, lat_start) = rollup_latencies(pool, &like).await?;
    let reconciles = n_children as f64 + args.roots as f64;
    let profiled = match window {
        Some(w) => Some(profile::finish(w, pool, reconciles).await?),
        None => None,
    };
    Ok(json!({
        "profile": profiled,
        "children": n_children,
        "secs_to_all_roots_ready": total,
        "reconciles_per_sec": reconciles / reconcile_window.max(1e-9),
        "machine_cpu_secs": cpu_busy,
        "machine_cpu_us_per_reconcile": cpu_busy.map(|s| s * 1e6 / reconciles.max(1.0)),
        "rollup_latency_ms": {"p50": percentile(&lat, 50.0), "p99": percentile(&lat, 99.0), "max": lat.last().copied().unwrap_or(0.0)},
        "rollup_latency_txn_start_ms": {"p50": percentile(&lat_start, 50.0), "p99": percentile(&lat_start, 99.0)},
    }))
}

/// Rollup latency per root whose name matches `pattern`, sorted, in ms: from the commit that
/// made its last child synced to the commit that made the root Ready (commit timestamps of the
/// rows' last writes). Also the older measure between the two transactions' start times
/// (`updated_at = now()`), which counts the child's whole drain batch as latency.
async fn rollup_latencies(
    pool: &sqlx::PgPool,
    pattern: &str,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let rows: Vec<(Option<f64>, f64)> = sqlx::query_as(
        "SELECT (extract(epoch FROM pg_xact_commit_timestamp(r.xmin)
                                 - max(pg_xact_commit_timestamp(c.xmin))) * 1000)::float8,
                (extract(epoch FROM r.updated_at - max(c.updated_at)) * 1000)::float8
         FROM resources r JOIN resources c ON c.root_id = r.id
         WHERE r.kind = 'benchbom' AND r.name LIKE $1 GROUP BY r.id, r.xmin, r.updated_at",
    )
    .bind(pattern)
    .fetch_all(pool)
    .await?;
    let mut start: Vec<f64> = rows.iter().map(|r| r.1).collect();
    // A commit timestamp is missing only if the server did not record it.
    let mut commit: Vec<f64> = rows.iter().filter_map(|r| r.0).collect();
    commit.sort_by(f64::total_cmp);
    start.sort_by(f64::total_cmp);
    Ok((commit, start))
}

/// Deletes every root at once and waits until no resource is left: `{nodes, secs, nodes_per_sec}`.
async fn delete_all(
    server: &Server,
    client: &reqwest::Client,
    pool: &sqlx::PgPool,
) -> anyhow::Result<Value> {
    let nodes: i64 = sqlx::query_scalar("SELECT count(*) FROM resources")
        .fetch_one(pool)
        .await?;
    let roots: Vec<String> =
        sqlx::query_scalar("SELECT name FROM resources WHERE kind = 'benchbom' ORDER BY name")
            .fetch_all(pool)
            .await?;
    eprintln!("deleting {} roots ({nodes} nodes) ...", roots.len());
    let t0 = Instant::now();
    for name in &roots {
        let r = client
            .delete(format!("{}/api/v1/resources/benchbom/{name}", server.http))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("delete {name} failed: {}", r.status());
        }
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    loop {
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM resources")
            .fetch_one(pool)
            .await?;
        if left == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("{left} resources still present after 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok(json!({"nodes": nodes, "secs": secs, "nodes_per_sec": nodes as f64 / secs.max(1e-9)}))
}
