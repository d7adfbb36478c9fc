//! Machine-wide CPU accounting from `/proc/stat`: how many CPU-seconds the whole machine
//! (converge, PostgreSQL, the workers, anything else) was busy between two samples.
//!
//! Wall-clock throughput on a shared 2-core machine moves by ±20% from run to run; the CPU
//! spent per reconcile moves much less, so A/B comparisons read both.

use std::time::Instant;

/// One reading of the aggregate `cpu` line.
#[derive(Debug, Clone, Copy)]
pub struct CpuSample {
    at: Instant,
    busy: u64,
    total: u64,
    cpus: usize,
}

impl CpuSample {
    /// Reads `/proc/stat` now; `None` where it does not exist or does not parse.
    pub fn now() -> Option<CpuSample> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        let mut lines = text.lines();
        let ticks: Vec<u64> = lines
            .next()?
            .strip_prefix("cpu ")?
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        // user nice system idle iowait irq softirq steal ...: idle, iowait and steal are time
        // this machine's processes did not run.
        let not_busy = ticks.get(3)? + ticks.get(4).unwrap_or(&0) + ticks.get(7).unwrap_or(&0);
        let total: u64 = ticks.iter().take(8).sum();
        let cpus = lines.filter(|l| l.starts_with("cpu")).count().max(1);
        Some(CpuSample {
            at: Instant::now(),
            busy: total.saturating_sub(not_busy),
            total,
            cpus,
        })
    }

    /// CPU-seconds the machine was busy since `earlier` (busy share of the ticks, times the
    /// elapsed wall time and the number of CPUs: no clock-tick constant needed).
    pub fn busy_secs_since(&self, earlier: &CpuSample) -> f64 {
        let total = self.total.saturating_sub(earlier.total);
        if total == 0 {
            return 0.0;
        }
        let share = self.busy.saturating_sub(earlier.busy) as f64 / total as f64;
        share * self.cpus as f64 * self.at.duration_since(earlier.at).as_secs_f64()
    }
}

/// CPU-seconds the threads of process `pid` have run so far (the sum of each thread's
/// `/proc/<pid>/task/<tid>/schedstat` run time, in nanoseconds there: no clock-tick
/// rounding, which matters for costs of a millisecond). Threads that already exited are not
/// counted; converge's runtime threads live as long as it does. `None` off Linux.
pub fn process_cpu_secs(pid: u32) -> Option<f64> {
    let mut ns: u64 = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        ns += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(ns as f64 / 1e9)
}
