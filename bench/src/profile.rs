//! `--profile`: where a run's time goes (issue 44). Over the reconcile window it reads
//!
//! - CPU per process: converge (every converge process the bench started), the PostgreSQL
//!   cluster (its backends plus what exited backends left in the postmaster's child times),
//!   the bench itself (the in-process workers and its pollers), and the whole machine;
//! - PostgreSQL time per statement from `pg_stat_statements` with `track = all`, so the
//!   statements inside the engine's plpgsql functions are counted too (a function's own row
//!   includes its nested statements: `toplevel` tells them apart).
//!
//! - rows written per table (`pg_stat_user_tables`): inserts, updates, how many of those were
//!   HOT (no index touched), deletes;
//!
//! Each figure is also divided by the reconciles of the window, so runs of different sizes
//! compare. With `--perf FILE`, `perf record` samples the whole machine over the same window
//! (`perf report -i FILE --no-children --sort comm,dso,sym` reads it).

use std::process::{Child, Command, Stdio};

use anyhow::Context;
use serde_json::{Value, json};

use crate::cpu::{self, CpuSample};

/// The PostgreSQL settings a profiled run starts its cluster with.
pub const PG_SETTINGS: &str = "shared_preload_libraries=pg_stat_statements \
     pg_stat_statements.track=all pg_stat_statements.max=2000 track_functions=pl ";

/// A window being profiled: the readings at its start.
pub struct Window {
    converge_pids: Vec<u32>,
    postmaster: u32,
    at: Readings,
    tables: Vec<TableRow>,
    perf: Option<Child>,
}

/// A table's cumulative row counts (`pg_stat_user_tables`, partitions folded into their
/// parent): inserted, updated, updated in place (HOT), deleted.
type TableRow = (String, i64, i64, i64, i64);

/// Every table's row counts so far. Backends report their counts when they go idle (at most
/// a second late), so a reading after the window waits for them first.
async fn table_rows(pool: &sqlx::PgPool) -> anyhow::Result<Vec<TableRow>> {
    Ok(sqlx::query_as(
        "SELECT coalesce(i.inhparent::regclass::text, s.relname::text) AS t,
                sum(n_tup_ins)::int8, sum(n_tup_upd)::int8, sum(n_tup_hot_upd)::int8,
                sum(n_tup_del)::int8
         FROM pg_stat_user_tables s LEFT JOIN pg_inherits i ON i.inhrelid = s.relid
         GROUP BY 1 ORDER BY 1",
    )
    .fetch_all(pool)
    .await?)
}

/// CPU-seconds so far, per party.
#[derive(Clone, Copy)]
struct Readings {
    converge: f64,
    postgres: f64,
    bench: f64,
    machine: Option<CpuSample>,
}

/// Starts a window: resets `pg_stat_statements` and reads every party's CPU so far. With
/// `perf_out`, starts `perf record -a` writing there.
pub async fn start(
    pool: &sqlx::PgPool,
    converge_pids: Vec<u32>,
    perf_out: Option<&std::path::Path>,
) -> anyhow::Result<Window> {
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(pool)
        .await
        .context("pg_stat_statements (install the PostgreSQL contrib modules)")?;
    let data_dir: String = sqlx::query_scalar("SELECT current_setting('data_directory')")
        .fetch_one(pool)
        .await?;
    let pid_file = std::path::Path::new(&data_dir).join("postmaster.pid");
    let postmaster: u32 = std::fs::read_to_string(&pid_file)
        .with_context(|| format!("reading {}", pid_file.display()))?
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .context("postmaster.pid names no pid")?;
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(pool)
        .await?;
    let perf = match perf_out {
        Some(path) => Some(
            Command::new("perf")
                .args(["record", "-F", "499", "-a", "-g", "-o"])
                .arg(path)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("starting perf record (is linux-perf installed?)")?,
        ),
        None => None,
    };
    // Let every backend report what it did before the window.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let tables = table_rows(pool).await?;
    let at = read(&converge_pids, postmaster);
    Ok(Window {
        converge_pids,
        postmaster,
        at,
        tables,
        perf,
    })
}

/// Ends the window and returns its profile, every cost also per reconcile (`reconciles` in
/// the window).
pub async fn finish(
    mut window: Window,
    pool: &sqlx::PgPool,
    reconciles: f64,
) -> anyhow::Result<Value> {
    let end = read(&window.converge_pids, window.postmaster);
    if let Some(perf) = window.perf.as_mut() {
        // SIGINT: perf writes its header and exits.
        let _ = Command::new("kill")
            .args(["-INT", &perf.id().to_string()])
            .status();
        let _ = perf.wait();
    }
    let per = |secs: f64| secs * 1e6 / reconciles.max(1.0);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let tables: Vec<Value> = table_rows(pool)
        .await?
        .into_iter()
        .filter_map(|(t, ins, upd, hot, del)| {
            let (_, ins0, upd0, hot0, del0) = window
                .tables
                .iter()
                .find(|r| r.0 == t)
                .cloned()
                .unwrap_or_default();
            let d = |a: i64, b: i64| (a - b) as f64 / reconciles.max(1.0);
            let row = json!({"table": t, "inserts": d(ins, ins0), "updates": d(upd, upd0),
                             "hot_updates": d(hot, hot0), "deletes": d(del, del0)});
            (ins + upd + del > ins0 + upd0 + del0).then_some(row)
        })
        .collect();
    let start = window.at;
    let machine = start
        .machine
        .zip(end.machine)
        .map(|(a, b)| b.busy_secs_since(&a));
    let rows: Vec<(bool, i64, f64, i64, i64, String)> = sqlx::query_as(
        "SELECT toplevel, calls, total_exec_time, rows,
                shared_blks_hit + shared_blks_read + shared_blks_dirtied,
                left(regexp_replace(query, '\\s+', ' ', 'g'), 200)
         FROM pg_stat_statements
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
         ORDER BY total_exec_time DESC LIMIT 40",
    )
    .fetch_all(pool)
    .await?;
    let statements: Vec<Value> = rows
        .into_iter()
        .map(|(toplevel, calls, total_ms, n, blocks, query)| {
            json!({
                "toplevel": toplevel,
                "calls": calls,
                "total_ms": total_ms,
                "mean_ms": total_ms / (calls.max(1) as f64),
                "rows": n,
                "calls_per_1k_reconciles": calls as f64 * 1000.0 / reconciles.max(1.0),
                "us_per_reconcile": total_ms * 1000.0 / reconciles.max(1.0),
                "blocks_per_reconcile": blocks as f64 / reconciles.max(1.0),
                "query": query,
            })
        })
        .collect();
    Ok(json!({
        "reconciles": reconciles,
        "cpu_us_per_reconcile": {
            "converge": per(end.converge - start.converge),
            "postgres": per(end.postgres - start.postgres),
            "bench_and_workers": per(end.bench - start.bench),
            "machine": machine.map(per),
        },
        "rows_per_reconcile": tables,
        "statements": statements,
    }))
}

fn read(converge_pids: &[u32], postmaster: u32) -> Readings {
    Readings {
        converge: converge_pids
            .iter()
            .filter_map(|p| cpu::process_cpu_secs(*p))
            .sum(),
        postgres: postgres_cpu_secs(postmaster),
        bench: cpu::process_cpu_secs(std::process::id()).unwrap_or(0.0),
        machine: CpuSample::now(),
    }
}

/// The cluster's CPU so far: the postmaster and every live child (schedstat), plus the
/// children that already exited (the postmaster's cutime + cstime, in clock ticks of 1/100 s).
fn postgres_cpu_secs(postmaster: u32) -> f64 {
    let mut secs = cpu::process_cpu_secs(postmaster).unwrap_or(0.0);
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{postmaster}/stat")) {
        // Fields after the parenthesised command: state is field 3, cutime 16, cstime 17.
        if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = |i: usize| f.get(i - 3).and_then(|v| v.parse::<f64>().ok());
            secs += ticks(16).unwrap_or(0.0) / 100.0 + ticks(17).unwrap_or(0.0) / 100.0;
        }
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return secs;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(postmaster) {
            secs += cpu::process_cpu_secs(pid).unwrap_or(0.0);
        }
    }
    secs
}
