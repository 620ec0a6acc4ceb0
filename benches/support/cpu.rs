//! CPU time spent on both sides of a measured case: this process (the clients) and the
//! PostgreSQL cluster (its postmaster and every backend), from `/proc` (Linux only).
//!
//! Wall-clock throughput on a loaded or small machine says little about the store; CPU time
//! per submission does not depend on the load, and `cores / cpu per submission` is the most
//! any number of clients can reach on this machine, whatever the store does in between.
//!
//! The server's CPU is the postmaster's own time, plus the time of its children that it has
//! reaped (`cutime`/`cstime`: a backend whose connection closed during the case), plus the
//! time of its live children; a child that exits during the case moves its time from the
//! third term to the second, so the sum stays whole. The postmaster is found through the
//! cluster's `postmaster.pid` (`SHOW data_directory`), which the bench's user must be able
//! to read; where it cannot, the server side is `None` and only the client side is shown.

use std::path::Path;

/// CPU seconds so far: this process, and the cluster (`None` where its processes are not
/// readable).
#[derive(Clone, Copy)]
pub struct CpuSample {
    client: f64,
    server: Option<f64>,
}

/// CPU time per submission of one case, in ms.
#[derive(Clone, Copy)]
pub struct CpuPerSubmission {
    pub client_ms: f64,
    pub server_ms: Option<f64>,
}

/// Samples CPU time for the cluster whose postmaster is `postmaster` (see [`postmaster_of`]).
pub struct CpuMeter {
    postmaster: Option<i32>,
    tick: f64,
}

impl CpuMeter {
    pub fn new(postmaster: Option<i32>) -> Self {
        let tick = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .unwrap_or(100) as f64;
        CpuMeter { postmaster, tick }
    }

    pub fn sample(&self) -> CpuSample {
        let client = stat("/proc/self/stat")
            .map(|s| (s.utime + s.stime) as f64 / self.tick)
            .unwrap_or(f64::NAN);
        let server = self.postmaster.and_then(|pm| self.cluster(pm));
        CpuSample { client, server }
    }

    /// The CPU between `before` and now, per submission of `submissions`.
    pub fn since(&self, before: CpuSample, submissions: usize) -> CpuPerSubmission {
        let after = self.sample();
        let per = 1000.0 / submissions.max(1) as f64;
        CpuPerSubmission {
            client_ms: (after.client - before.client) * per,
            server_ms: before.server.zip(after.server).map(|(b, a)| (a - b) * per),
        }
    }

    fn cluster(&self, postmaster: i32) -> Option<f64> {
        let pm = stat(&format!("/proc/{postmaster}/stat"))?;
        let mut ticks = pm.utime + pm.stime + pm.cutime + pm.cstime;
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            if pid == postmaster {
                continue;
            }
            if let Some(s) = stat(&format!("/proc/{pid}/stat")).filter(|s| s.ppid == postmaster) {
                ticks += s.utime + s.stime;
            }
        }
        Some(ticks as f64 / self.tick)
    }
}

/// The postmaster's pid of the cluster whose data directory is `data_directory`.
pub fn postmaster_of(data_directory: &str) -> Option<i32> {
    let text = std::fs::read_to_string(Path::new(data_directory).join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// The fields of `/proc/PID/stat` this meter reads, in clock ticks.
struct Stat {
    ppid: i32,
    utime: u64,
    stime: u64,
    cutime: u64,
    cstime: u64,
}

/// Parses `/proc/PID/stat` (`proc(5)`): the command is in parentheses and may hold spaces, so
/// fields are counted from the last `)`.
fn stat(path: &str) -> Option<Stat> {
    let text = std::fs::read_to_string(path).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17).
    let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<i64>().ok());
    Some(Stat {
        ppid: field(4)? as i32,
        utime: field(14)? as u64,
        stime: field(15)? as u64,
        cutime: field(16)?.max(0) as u64,
        cstime: field(17)?.max(0) as u64,
    })
}
