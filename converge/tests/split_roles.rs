//! Split roles and drain, proven: one `ROLE=control` and two `ROLE=broker` processes of the
//! real `converge` binary on one database, with two real hello workers, each given both
//! brokers (in opposite orders).
//!
//! - The three processes boot at once on an empty database, and exactly one of them applies
//!   the migrations and the engine files (the others wait on the advisory lock and find
//!   nothing to do): their logs and the migrations table say so.
//! - `GET /api/v1/cluster` on the control process lists the three and the worker on each
//!   broker; a worker subscribed for an unregistered kind is warned about and flagged; a
//!   resource of a kind no worker serves says what it waits for.
//! - Under load the workers on both brokers get work; one broker is SIGKILLed mid-load and
//!   every resource still becomes Ready (its worker fails over, its leases come back).
//! - The other broker is sent SIGTERM mid-load: it sends Drain, waits for the in-flight
//!   results and accepts them (nothing runs twice, nothing is released unfinished), exits
//!   cleanly, and its workers reconnect to the surviving broker (the first one, restarted on
//!   its address) and finish the rest.
//!
//! And a plan across processes: `POST /api/v1/resources:plan` on a `ROLE=control` process
//! plans an SDK composite whose composer is a worker of a `ROLE=broker` process, through a
//! dry run (`plan_requests`: the only way between the two).

mod common;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Converge, Worker, free_port};
use converge_control::testing::{TestDb, wait_for};
use converge_engine::db::{MIGRATOR, engine_sql::ENGINE_FILES};
use converge_sdk::{HandlerError, KindVersion, Outcome, Provider, ReactionRequest, Registry};
use converge_testkit::{Api, Method};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, BufReader},
    process::Child,
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(40);
/// Resources per load batch, and how long each task takes.
const BATCH: usize = 24;
const SLEEP_MS: u64 = 400;

/// One `converge serve` process whose output the test reads (JSON log lines).
struct Proc {
    role: &'static str,
    child: Child,
    out: Arc<Mutex<Vec<String>>>,
    readers: Vec<JoinHandle<()>>,
    /// The HTTP port: the API (control) or the probes (HEALTH_ADDR of a broker).
    http: u16,
    /// The WorkerService port (brokers).
    grpc: u16,
}

fn collect(
    pipe: impl AsyncRead + Unpin + Send + 'static,
    out: Arc<Mutex<Vec<String>>>,
    role: &'static str,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut lines = BufReader::new(pipe).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("[{role}] {line}");
            out.lock().unwrap().push(line);
        }
    })
}

impl Proc {
    /// Starts `converge serve` as `role` on `db_url` with the HTTP (or probe) listener on
    /// `http` and the broker on `grpc`, plus `env`.
    fn spawn(db_url: &str, role: &'static str, http: u16, grpc: u16, env: &[(&str, &str)]) -> Proc {
        let mut cmd = common::serve_command(db_url, http, grpc, env);
        cmd.env("ROLE", role)
            .env("HEALTH_ADDR", format!("127.0.0.1:{http}"))
            .env("LOG_FORMAT", "json")
            .env(
                "LOG_LEVEL",
                "warn,converge_engine=info,converge_broker=info",
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn converge");
        let out = Arc::new(Mutex::new(Vec::new()));
        let readers = vec![
            collect(child.stdout.take().unwrap(), out.clone(), role),
            collect(child.stderr.take().unwrap(), out.clone(), role),
        ];
        Proc {
            role,
            child,
            out,
            readers,
            http,
            grpc,
        }
    }

    fn text(&self) -> String {
        self.out.lock().unwrap().join("\n")
    }

    /// The JSON log lines whose message is `message`.
    fn logged(&self, message: &str) -> Vec<Value> {
        self.out
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["fields"]["message"] == message)
            .collect()
    }

    async fn ready(&self, client: &reqwest::Client) -> bool {
        client
            .get(format!("http://127.0.0.1:{}/readyz", self.http))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
    }

    /// Waits for the output readers once the process is gone.
    async fn drained_output(&mut self) {
        for r in self.readers.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(5), r).await;
        }
    }

    fn broker_addr(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc)
    }
}

/// Starts every process of `specs` at once on `db_url` and waits until all answer
/// `/readyz`. A process that exits first must have lost its port to another test (it is
/// started again on new ones); any other exit fails the test with its output.
async fn boot_together(db_url: &str, specs: &[(&'static str, &[(&str, &str)])]) -> Vec<Proc> {
    let start = |(role, env): &(&'static str, &[(&str, &str)])| {
        Proc::spawn(db_url, role, free_port(), free_port(), env)
    };
    let mut procs: Vec<Proc> = specs.iter().map(start).collect();
    let client = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let mut all = true;
        for (i, spec) in specs.iter().enumerate() {
            if let Some(status) = procs[i].child.try_wait().unwrap() {
                procs[i].drained_output().await;
                let text = procs[i].text();
                assert!(
                    text.contains("cannot listen"),
                    "{} exited ({status}) while booting:\n{text}",
                    procs[i].role
                );
                procs[i] = start(spec);
                all = false;
            } else if !procs[i].ready(&client).await {
                all = false;
            }
        }
        if all {
            return procs;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the processes were not ready within {T:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Exactly one of `procs` applied the schema migrations and the engine files; the database
/// records each migration once.
async fn assert_migrated_once(db: &TestDb, procs: &[&Proc]) {
    let all: Vec<i64> = MIGRATOR.iter().map(|m| m.version).collect();
    let migrators: Vec<&str> = procs
        .iter()
        .filter(|p| !p.logged("schema migrations applied").is_empty())
        .map(|p| p.role)
        .collect();
    assert_eq!(migrators.len(), 1, "processes that migrated: {migrators:?}");
    let p = procs
        .iter()
        .find(|p| !p.logged("schema migrations applied").is_empty())
        .unwrap();
    let lines = p.logged("schema migrations applied");
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["fields"]["versions"], format!("{all:?}"));
    assert_eq!(p.logged("engine file applied").len(), ENGINE_FILES.len());
    for other in procs.iter().filter(|o| o.grpc != p.grpc) {
        assert!(
            other.logged("engine file applied").is_empty(),
            "{}",
            other.text()
        );
    }
    let recorded: Vec<(i64, bool)> =
        sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(recorded, all.iter().map(|v| (*v, true)).collect::<Vec<_>>());
    let files: i64 = sqlx::query_scalar("SELECT count(*) FROM engine_sql")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(files, i64::try_from(ENGINE_FILES.len()).unwrap());
}

/// The member whose WorkerService is on `grpc`.
fn member_on(cluster: &Value, grpc: u16) -> Option<&Value> {
    let addr = format!("127.0.0.1:{grpc}");
    ready_members(cluster).find(|m| m["addresses"]["grpc"] == addr.as_str())
}

/// The members listed Ready (a killed process stays listed NotReady until its row's TTL).
fn ready_members(cluster: &Value) -> impl Iterator<Item = &Value> {
    cluster["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["status"] == "Ready")
}

/// The sorted names of the workers on the broker at `grpc` (none when it is not listed).
fn workers_on(cluster: &Value, grpc: u16) -> Vec<String> {
    common::worker_names(member_on(cluster, grpc))
}

/// The sorted roles of the members listed Ready.
fn roles(cluster: &Value) -> Vec<String> {
    let mut r: Vec<String> = ready_members(cluster)
        .map(|m| m["role"].as_str().unwrap_or_default().to_string())
        .collect();
    r.sort();
    r
}

/// The cluster as the control process lists it, once `pred` holds for it.
async fn cluster_when(api: &Api, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    common::cluster_when(api, T, what, pred).await
}

/// Applies `n` hello resources `{prefix}-{i}` that each take [`SLEEP_MS`].
async fn apply_batch(api: &Api, prefix: &str) -> Vec<String> {
    let names: Vec<String> = (0..BATCH).map(|i| format!("{prefix}-{i}")).collect();
    let items: Vec<Value> = names
        .iter()
        .map(|n| json!({"kind": "hello", "kind_version": 1, "name": n, "spec": {"sleep_ms": SLEEP_MS}}))
        .collect();
    let (s, body) = api
        .call(Method::POST, "resources:batch", Some(&json!(items)))
        .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["failed"], 0, "{body}");
    names
}

/// Waits until every resource of `names` is Ready.
async fn all_ready(api: &Api, names: &[String], what: &str) {
    wait_for(T, what, || async {
        for n in names {
            let r = api.get("hello", n).await?;
            if r["phase"] != "Ready" {
                return None;
            }
        }
        Some(())
    })
    .await;
}

/// How many times each resource was started, from the workers' HELLO_LOG files.
fn starts(logs: &[&Path]) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for path in logs {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for line in text.lines() {
            let mut f = line.split_whitespace();
            if f.next() == Some("start")
                && let Some(name) = f.next()
            {
                *out.entry(name.to_string()).or_default() += 1;
            }
        }
    }
    out
}

/// Whether the HELLO_LOG at `path` records a start of a resource named `{prefix}-*`.
fn started(path: &Path, prefix: &str) -> bool {
    starts(&[path])
        .keys()
        .any(|n| n.starts_with(&format!("{prefix}-")))
}

/// A provider of a kind nobody registered (a worker's typo).
struct Typo;

impl Provider for Typo {
    fn kind(&self) -> KindVersion {
        KindVersion::new("helo", 1)
    }

    async fn work(&self, _req: ReactionRequest) -> Result<Outcome, HandlerError> {
        Ok(Outcome::default())
    }
}

/// A composer of kind `fan`: `n` children `<root>-<i>` of kind `hello`.
struct Fan;

impl Provider for Fan {
    fn kind(&self) -> KindVersion {
        KindVersion::new("fan", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let n = req.resource.spec.value()["n"].as_u64().unwrap_or(0);
        let mut out = Outcome::default();
        for i in 0..n {
            out = out.with_child(converge_sdk::ChildSpec::new(
                "hello",
                1,
                format!("{}-{i}", req.resource.name),
                json!({"greeting": "hi"}),
            ));
        }
        Ok(out)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_on_a_control_process_dry_runs_on_a_broker_process_worker() {
    let db = TestDb::empty().await;
    let mut procs = boot_together(&db.url, &[("control", &[]), ("broker", &[])]).await;
    let mut broker = procs.pop().unwrap();
    let mut control = procs.pop().unwrap();
    let api = Api::new(format!("http://127.0.0.1:{}", control.http));
    api.apply_manifest(&Converge::hello_manifest(0)).await;
    api.apply_manifest(&json!({"kind": "fan", "kind_version": 1, "provider": "sdk",
        "reactions": [{"name": "compose", "trigger": "specChange", "emits": ["children", "status"]}]}))
        .await;
    let stop = CancellationToken::new();
    let mut cfg = converge_sdk::WorkerConfig::new(broker.broker_addr());
    cfg.worker_name = "fan".into();
    tokio::spawn(converge_sdk::run_worker(
        cfg,
        Registry::new().with(Fan),
        stop.clone().cancelled_owned(),
    ));
    let grpc = broker.grpc;
    cluster_when(&api, "the fan worker on the broker", |v| {
        workers_on(v, grpc) == ["fan"]
    })
    .await;
    let doc = json!({"kind": "fan", "kind_version": 1, "name": "f", "spec": {"n": 2}});
    let (s, p) = api.call(Method::POST, "resources:plan", Some(&doc)).await;
    assert_eq!(s, 200, "{p}");
    let item = &p["results"][0];
    assert_eq!(item["action"], "create", "{item}");
    assert!(item["warnings"].as_array().unwrap().is_empty(), "{item}");
    let mut added: Vec<&str> = item["children"]["add"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    added.sort();
    assert_eq!(added, ["f-0", "f-1"], "{item}");
    assert!(
        api.get("fan", "f").await.is_none(),
        "a plan creates nothing"
    );
    stop.cancel();
    for p in [&mut control, &mut broker] {
        converge_testkit::terminate(&mut p.child, Duration::from_secs(15)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn control_and_two_brokers_share_a_database_survive_a_kill_and_drain_on_term() {
    let db = TestDb::empty().await;
    let dir: PathBuf = std::env::temp_dir().join(format!("split-roles-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    // B drains for long enough that its in-flight tasks always finish inside the window.
    let mut procs = boot_together(
        &db.url,
        &[
            ("control", &[]),
            ("broker", &[]),
            ("broker", &[("SHUTDOWN_DRAIN", "20s")]),
        ],
    )
    .await;
    let mut b = procs.pop().unwrap();
    let mut a = procs.pop().unwrap();
    let control = procs.pop().unwrap();
    assert_migrated_once(&db, &[&control, &a, &b]).await;

    let api = Api::new(format!("http://127.0.0.1:{}", control.http));
    api.apply_manifest(&Converge::hello_manifest(0)).await;
    let (log_a, log_b) = (dir.join("wa.log"), dir.join("wb.log"));
    let worker_env = |log: &Path| {
        vec![
            ("WORKER_MAX_PARALLEL", "4".to_string()),
            ("HELLO_LOG", log.display().to_string()),
        ]
    };
    let spawn_worker = |name: &str, first: &Proc, second: &Proc, log: &Path| {
        let env = worker_env(log);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let addrs = format!("{},{}", first.broker_addr(), second.broker_addr());
        Worker::hello(&addrs, name, &env)
    };
    let wa = spawn_worker("wa", &a, &b, &log_a);
    let wb = spawn_worker("wb", &b, &a, &log_b);
    let typo_stop = CancellationToken::new();
    let mut cfg = converge_sdk::WorkerConfig::new(b.broker_addr());
    cfg.worker_name = "typo".into();
    tokio::spawn(converge_sdk::run_worker(
        cfg,
        Registry::new().with(Typo),
        typo_stop.clone().cancelled_owned(),
    ));

    // Who is here: the three processes, and the workers on each broker.
    let (a_port, b_port) = (a.grpc, b.grpc);
    let v = cluster_when(&api, "three members, a worker on each broker", |v| {
        roles(v) == ["broker", "broker", "control"]
            && workers_on(v, a_port) == ["wa"]
            && workers_on(v, b_port) == ["typo", "wb"]
    })
    .await;
    let typo = member_on(&v, b_port).unwrap()["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "typo")
        .unwrap()
        .clone();
    assert_eq!(
        typo["unknown_kinds"],
        json!([{"kind": "helo", "kind_version": 1}])
    );
    let warned = b.logged("worker subscribed for kinds that are not registered; it gets no tasks of them until a manifest is applied");
    assert_eq!(warned.len(), 1, "{}", b.text());
    assert_eq!(warned[0]["fields"]["unknown"], "helo/v1");
    typo_stop.cancel();
    let (s, kinds) = api.call(Method::GET, "kinds", None).await;
    assert_eq!(s, 200);
    assert_eq!(kinds["kinds"][0]["workers"], 2, "{kinds}");

    // A resource of a kind no worker serves says so.
    api.apply_manifest(&json!({"kind": "vpc", "kind_version": 1, "reactions": [
        {"name": "work", "trigger": "specChange", "emits": ["status"]}]}))
        .await;
    let (s, body) = api
        .call(
            Method::POST,
            "resources",
            Some(&json!({"kind": "vpc", "kind_version": 1, "name": "main", "spec": {}})),
        )
        .await;
    assert_eq!(s, 201, "{body}");
    let vpc = api.get("vpc", "main").await.unwrap();
    assert_eq!(vpc["waiting_for"], "no worker serves vpc v1", "{vpc}");

    // Load; the workers on both brokers get work; then broker A is SIGKILLed mid-load.
    let first = apply_batch(&api, "k").await;
    wait_for(T, "work on both brokers' workers", || async {
        (started(&log_a, "k") && started(&log_b, "k")).then_some(())
    })
    .await;
    a.child.kill().await.unwrap();
    a.drained_output().await;
    all_ready(&api, &first, "every resource Ready after the SIGKILL").await;

    // A comes back on its address (the workers know only these two), as a new member.
    let a_old = member_on(&v, a_port).unwrap()["id"].clone();
    a = Proc::spawn(&db.url, "broker", a.http, a.grpc, &[]);
    wait_for(T, "broker A restarted", || async {
        a.ready(&reqwest::Client::new()).await.then_some(())
    })
    .await;
    let v = cluster_when(&api, "the dead A gone, the new A listed", |v| {
        roles(v) == ["broker", "broker", "control"]
            && member_on(v, a_port).is_some_and(|m| m["id"] != a_old)
            // The killed A stays listed, NotReady, until its row's TTL (MEMBER_GC_AFTER).
            && v["members"].as_array().is_some_and(|ms| {
                ms.iter()
                    .any(|m| m["id"] == a_old && m["status"] == "NotReady")
            })
            && workers_on(v, b_port) == ["wa", "wb"]
    })
    .await;
    assert!(workers_on(&v, a_port).is_empty(), "{v}");

    // Load again, all on B; SIGTERM to B mid-load.
    let second = apply_batch(&api, "d").await;
    wait_for(T, "B's workers running the second batch", || async {
        (started(&log_a, "d") && started(&log_b, "d")).then_some(())
    })
    .await;
    converge_testkit::signal(b.child.id().unwrap(), "TERM");
    let status = tokio::time::timeout(T, b.child.wait())
        .await
        .expect("B exits after its drain")
        .unwrap();
    b.drained_output().await;
    assert!(status.success(), "B: {status}\n{}", b.text());
    let drains = b.logged("draining in-flight tasks");
    assert_eq!(drains.len(), 1, "{}", b.text());
    assert!(
        drains[0]["fields"]["inflight"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "B had tasks in flight when it drained: {}",
        drains[0]
    );
    assert!(
        b.logged("drain window over; releasing unfinished leases")
            .is_empty(),
        "B released leases instead of waiting for their results: {}",
        b.text()
    );

    // The workers moved to A and finished; B's in-flight results were accepted, so no
    // resource of the second batch ran twice.
    all_ready(&api, &second, "every resource Ready after B drained").await;
    let runs = starts(&[&log_a, &log_b]);
    for n in &second {
        assert_eq!(runs.get(n), Some(&1), "{n} ran {:?} times", runs.get(n));
    }
    let v = cluster_when(&api, "B gone, both workers on A", |v| {
        roles(v) == ["broker", "control"] && workers_on(v, a_port) == ["wa", "wb"]
    })
    .await;
    assert!(member_on(&v, b_port).is_none(), "{v}");
    let vpc = api.get("vpc", "main").await.unwrap();
    assert_eq!(vpc["waiting_for"], "no worker serves vpc v1", "{vpc}");

    drop((wa, wb));
    for mut p in [control, a] {
        converge_testkit::terminate(&mut p.child, Duration::from_secs(15)).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Claims ahead of free slots (broker/src/ahead.rs) with the real processes: a broker whose
/// one worker has 2 slots holds more than 2 leases while the worker keeps up (tasks claimed
/// ahead, waiting in it); SIGTERM gives every waiting task back to the queue at once (no lease
/// outlives the broker, none waits for LEASE_STALE_AFTER); a worker on the other process
/// finishes the rest, and every resource ran exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn a_broker_claims_ahead_of_its_slots_and_gives_the_waiting_back_when_it_drains() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;
    let mut b = c.spawn_broker(&[]).await;
    let dir = std::env::temp_dir().join(format!("converge-ahead-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let (la, lb) = (dir.join("a.log"), dir.join("b.log"));
    let names: Vec<String> = (0..400).map(|i| format!("ahead-{i}")).collect();
    let items: Vec<Value> = names
        .iter()
        .map(|n| json!({"kind": "hello", "kind_version": 1, "name": n, "spec": {"sleep_ms": 10}}))
        .collect();
    let api = Api::new(&c.http);
    let (s, body) = api
        .call(Method::POST, "resources:batch", Some(&json!(items)))
        .await;
    assert_eq!((s, &body["failed"]), (200, &json!(0)), "{body}");

    let two_slots = [
        ("WORKER_MAX_PARALLEL", "2"),
        ("HELLO_LOG", la.to_str().unwrap()),
    ];
    let wa = Worker::hello(&b.broker, "wa", &two_slots);
    wait_for(T, "more leases than the worker's 2 slots", || async {
        (common::hello_leases(&c.db.pool).await > 2).then_some(())
    })
    .await;
    let status = converge_testkit::terminate(&mut b.child, Duration::from_secs(15)).await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert_eq!(
        common::hello_leases(&c.db.pool).await,
        0,
        "leases left behind by a broker that drained"
    );
    drop(wa);

    let _wb = Worker::hello(
        &c.broker,
        "wb",
        &[
            ("WORKER_MAX_PARALLEL", "2"),
            ("HELLO_LOG", lb.to_str().unwrap()),
        ],
    );
    all_ready(&api, &names, "every resource Ready on the other process").await;
    let runs = starts(&[&la, &lb]);
    for n in &names {
        assert_eq!(runs.get(n), Some(&1), "{n} ran {:?} times", runs.get(n));
    }
    assert!(
        runs.len() == names.len() && std::fs::read_to_string(&la).is_ok_and(|t| !t.is_empty()),
        "both workers ran tasks"
    );
    c.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
