//! The process table the console samples (SPEC U1): `/proc` state and resident memory and CPU
//! by pid, sampled every second by the event loop and read by the panes. Plain data here; the
//! sampling reads `/proc` through [`crate::canary::client::proc_state`] and `sysinfo`.

use std::collections::BTreeMap;

use super::limits::Level;

/// Resident memory and CPU of one process, sampled by the console (U1).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ProcUsage {
    pub rss_bytes: u64,
    /// Percent of one core since the previous sample.
    pub cpu_percent: f32,
}

/// What the last sample saw, by pid.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcTable {
    /// Process state from `/proc` by pid: `R`, `S`, `Z exit 1`, … or `gone`.
    pub state: BTreeMap<u64, String>,
    /// RSS and CPU by pid, for every process the panes show.
    pub usage: BTreeMap<u64, ProcUsage>,
    /// When (Unix ms) each process was first seen ended, so its uptime stays frozen at exit.
    pub ended_ms: BTreeMap<u64, f64>,
    /// Parent, name and start of each sampled process, from `/proc/<pid>/stat` (kept after it
    /// ends, so a row still names its parent).
    pub info: BTreeMap<u64, ProcInfo>,
    /// The agent host's descendants (the observed process it started, that process's worker,
    /// anything else), parents before children, found in the process table; one seen once stays
    /// listed (shown gone once it ends).
    pub host_tree: Vec<u64>,
}

/// What `/proc/<pid>/stat` says of a process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcInfo {
    pub ppid: u32,
    /// The executable's name as the kernel keeps it (at most 15 bytes).
    pub comm: String,
    /// When it started (Unix ms).
    pub started_ms: Option<f64>,
}

/// `pid`'s parent, name and start, or `None` when it is gone or unreadable.
pub fn read_info(pid: u64) -> Option<ProcInfo> {
    let stat = procfs::process::Process::new(i32::try_from(pid).ok()?)
        .ok()?
        .stat()
        .ok()?;
    Some(info_of(&stat))
}

fn info_of(stat: &procfs::process::Stat) -> ProcInfo {
    let boot = procfs::boot_time_secs().ok();
    let ticks = procfs::ticks_per_second().max(1);
    ProcInfo {
        ppid: u32::try_from(stat.ppid).unwrap_or(0),
        comm: stat.comm.clone(),
        started_ms: boot.map(|b| (b as f64 + stat.starttime as f64 / ticks as f64) * 1000.0),
    }
}

/// Every live descendant of `root` in the process table, parents before children (one scan of
/// `/proc`), with what its stat says.
pub fn descendants(root: u64) -> Vec<(u64, ProcInfo)> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let mut by_parent: BTreeMap<u32, Vec<(u64, ProcInfo)>> = BTreeMap::new();
    for stat in all.filter_map(|p| p.ok()?.stat().ok()) {
        let info = info_of(&stat);
        if let Ok(pid) = u64::try_from(stat.pid) {
            by_parent.entry(info.ppid).or_default().push((pid, info));
        }
    }
    let mut out = Vec::new();
    let mut next = vec![root];
    while let Some(parent) = next.pop() {
        let Ok(parent) = u32::try_from(parent) else {
            continue;
        };
        for (pid, info) in by_parent.remove(&parent).unwrap_or_default() {
            next.push(pid);
            out.push((pid, info));
        }
    }
    out
}

impl ProcTable {
    /// A process's state word from its sampled `/proc` state (U1: state and exit status); a
    /// pid not sampled yet is taken as running.
    pub fn word(&self, pid: Option<u64>) -> (Level, String) {
        match pid.and_then(|p| self.state.get(&p)) {
            None => (Level::Ok, "running".into()),
            Some(s) if s.starts_with("Z ") => (Level::Limit, format!("exited ({})", &s[2..])),
            Some(s) if s == "Z" || s == "X" || s == "gone" => (Level::Limit, "exited".into()),
            Some(s) if s == "T" || s == "t" => (Level::High, "stopped".into()),
            Some(_) => (Level::Ok, "running".into()),
        }
    }

    /// Whether the sample saw `pid` gone (reaped, or a zombie).
    pub fn gone(&self, pid: u64) -> bool {
        self.state
            .get(&pid)
            .is_some_and(|s| s == "gone" || s.starts_with('Z'))
    }
}

/// Whether an agent host's progress `state` says it still runs.
pub fn host_running(state: &str) -> bool {
    matches!(state, "starting" | "running" | "sealed")
}

/// RSS and CPU (percent of one core since the previous call) of `pids`; pids that are gone or
/// unreadable are left out.
pub fn sample_usage(
    system: &mut Option<sysinfo::System>,
    pids: &[u64],
) -> BTreeMap<u64, ProcUsage> {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate};
    let Some(system) = system.as_mut() else {
        return BTreeMap::new();
    };
    let wanted: Vec<Pid> = pids
        .iter()
        .filter_map(|p| u32::try_from(*p).ok())
        .map(Pid::from_u32)
        .collect();
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&wanted),
        true,
        ProcessRefreshKind::nothing().with_memory().with_cpu(),
    );
    wanted
        .iter()
        .filter_map(|pid| {
            system.process(*pid).map(|p| {
                (
                    u64::from(pid.as_u32()),
                    ProcUsage {
                        rss_bytes: p.memory(),
                        cpu_percent: p.cpu_usage(),
                    },
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::canary::client::{parse_proc_stat, proc_state};

    fn stat(state: &str, exit_code: i32) -> String {
        // pid (comm) state, then fields 4..=51 as zeros, then exit_code (field 52).
        let middle = vec!["0"; 48].join(" ");
        format!("4242 (patch diff) {state} {middle} {exit_code}")
    }

    #[test]
    fn proc_stat_gives_state_and_a_zombies_exit_status() {
        assert_eq!(parse_proc_stat(&stat("S", 0)), "S");
        assert_eq!(parse_proc_stat(&stat("Z", 1 << 8)), "Z exit 1");
        assert_eq!(parse_proc_stat(&stat("Z", 9)), "Z signal 9");
        assert_eq!(
            parse_proc_stat("4242 (x) Z 1"),
            "?",
            "a truncated line is not a stat"
        );
        assert_eq!(parse_proc_stat("garbage"), "?");
    }

    #[test]
    fn proc_state_reads_a_real_zombie_and_a_reaped_process() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .expect("sh");
        let pid = u64::from(child.id());
        // Until it is reaped the exited child is a zombie carrying its wait status; poll (the
        // exit is asynchronous) with a deadline rather than sleeping a fixed time.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while proc_state(pid) != "Z exit 3" {
            assert!(
                std::time::Instant::now() < deadline,
                "state {}",
                proc_state(pid)
            );
            std::thread::yield_now();
        }
        child.wait().expect("reap");
        assert_eq!(proc_state(pid), "gone");
        assert!(["R", "S"].contains(&proc_state(u64::from(std::process::id())).as_str()));
    }
}
